"""`FaultInjector`: the faults of `--inject`, raised inside a source's tools.

Each kind is a real failure of the kind a search backend has, raised where a real one
would be, so that agentmesh's classification, local retry and routing do the rest:

| kind          | what the tool does                                | agentmesh sees           |
| ------------- | ------------------------------------------------- | ------------------------ |
| `timeout`     | the backend hangs; the tool's own timeout fires   | TimeoutError (transient) |
| `rate_limit`  | the backend answers "slow down, retry after 50ms" | TransientError, 429-like |
| `unavailable` | the backend refuses the connection                | ConnectionError          |
| `permission`  | the backend refuses this caller                   | PermissionDenied         |
| `invalid`     | the backend accepts plain words only, no quotes   | InvalidInput          |
| `empty`       | the backend finds nothing                         | an empty success         |

A fault strikes each call with its probability (1 by default). Draws are derived from
`--seed`, the source and the call, not from the order in which concurrent calls happen
to run, so one seed gives the same run every time.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable

from agentmesh import InvalidInput, PermissionDenied, TransientError

from .faults import Fault

__all__ = ["RETRY_AFTER", "FaultInjector"]

RETRY_AFTER = 0.05  # seconds a rate-limited backend asks for


class FaultInjector:
    """Decides, call by call and reproducibly, whether a source's tool fails and how."""

    def __init__(self, faults: Iterable[Fault] = (), *, seed: int = 0) -> None:
        self.faults: dict[str, list[Fault]] = {}
        for fault in faults:
            self.faults.setdefault(fault.source, []).append(fault)
        self.seed = seed
        self._calls: dict[tuple[str, str], int] = {}

    async def strike(self, source: str, call: str, *, plain_query: bool) -> bool:
        """Fail this call of `source` if a fault says so; True means "answer empty".

        Args:
            source: the source whose tool is called.
            call: identifies the logical call (tool and arguments); repeated calls of it
                draw anew, so a fault with probability 0.5 may spare the retry.
            plain_query: whether the query is plain words (an `invalid` fault only
                rejects queries that use syntax).
        """
        number = self._calls.get((source, call), 0) + 1
        self._calls[(source, call)] = number
        for fault in self.faults.get(source, ()):
            # A string seed is hashed with SHA-512: stable across runs and platforms.
            draw = random.Random(f"{self.seed}/{fault}/{call}/{number}").random()
            if draw >= fault.probability:
                continue
            if fault.kind == "empty":
                return True
            if fault.kind == "invalid" and plain_query:
                continue
            await _fail(fault, source)
        return False


async def _fail(fault: Fault, source: str) -> None:
    note = "(injected fault)"
    if fault.kind == "timeout":
        # Hang like a stuck backend; the caller's bound gives up on it (TimeoutError).
        await asyncio.sleep(3600)
    elif fault.kind == "rate_limit":
        raise TransientError(
            f"{source}: too many requests {note}",
            error_type="rate_limited",
            retry_after=RETRY_AFTER,
        )
    elif fault.kind == "unavailable":
        raise ConnectionError(f"{source}: connection refused {note}")
    elif fault.kind == "permission":
        raise PermissionDenied(f"{source}: this caller may not read the index {note}")
    elif fault.kind == "invalid":
        raise InvalidInput(
            f"{source}: quoted terms are not supported; send plain words {note}",
            error_type="invalid_query",
        )
