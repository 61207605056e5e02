"""The ledger of side effects: what makes a subagent's calls safe to resume.

`ToolLedger` claims every call of a non-idempotent tool of one task in one run before
it is made (`CheckpointStore.claim`), and records its result in place of the claim;
when the run resumes, `Context.call` returns the recorded result instead of acting
twice. Of two processes about to make the same call, only the one that claimed it
does; a claim without a result (a call in flight elsewhere, or a process that died
between the claim and the result) means the call may have run.
`claim_in` claims any other value (a person's answer) the same way. (A task's saved
progress is `_progress`'s.)

The ledger writes with secrets masked, as in logs and envelopes (`redact`): a store is a
file or a database that outlives the run. A call is found again by a digest of its clear
arguments, never by the stored text, so masking costs replay nothing; a replayed result
carries the masked text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pydantic_core
from pydantic import StrictBool

from agentmesh._codec import read_as
from agentmesh._redaction import redact
from agentmesh.checkpoints import Checkpoint, CheckpointStore
from agentmesh.errors import UsageError
from agentmesh.task import Task

__all__ = [
    "InFlight",
    "Replay",
    "ToolLedger",
    "claim_in",
    "digest",
    "task_key",
]


def task_key(task: Task) -> str:
    """A task id that is the same in every process: for a task given without one."""
    content = {"query": task.query, "topic": task.topic, "metadata": task.metadata}
    return "task-" + digest(content)[:16]


def _kept(arguments: Mapping[str, Any]) -> Any:
    """A call's arguments as the ledger keeps them, for a person reading it (masked):
    matching uses the call's key, a digest of the clear arguments."""
    return redact(pydantic_core.to_jsonable_python(dict(arguments), fallback=repr))


def digest(value: Any) -> str:
    """The same hex digest of `value` in every process (its canonical JSON's SHA-256)."""
    jsonable = pydantic_core.to_jsonable_python(value, fallback=repr)
    canonical = json.dumps(jsonable, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Recorded:
    """A ledger entry as `ToolLedger.record` writes it; the result is typed by the caller."""

    result: Any
    masked: StrictBool = False


@dataclass(frozen=True, slots=True)
class Replay:
    """The recorded result of a call that already happened."""

    data: Any
    call: str


@dataclass(frozen=True, slots=True)
class InFlight:
    """A call claimed at `claimed_at` whose result was never recorded: it may have run."""

    call: str
    claimed_at: datetime


class ToolLedger:
    """The claimed and completed calls of non-idempotent tools of one task in one run.

    A call is known by its tool, its validated arguments (their JSON form) and how many
    identical calls came before it in the same attempt: `send(to="a")` twice in one
    attempt is two calls, and the first `send(to="a")` of a later attempt or a resumed
    run is the first one again.
    """

    __slots__ = ("_counts", "_warned", "log", "run_id", "stage", "store")

    def __init__(self, store: CheckpointStore, run_id: str, stage: str, log: Any) -> None:
        self.store = store
        self.run_id = run_id
        self.stage = stage
        self.log = log
        self._counts: dict[str, int] = {}
        self._warned = False

    def new_attempt(self) -> None:
        """Count calls from the start again: a retried attempt replays the earlier one."""
        self._counts.clear()

    def call_key(self, tool: str, arguments: Mapping[str, Any]) -> str:
        base = f"call/{tool}/{digest(dict(arguments))[:16]}"
        number = self._counts.get(base, 0) + 1
        self._counts[base] = number
        return f"{base}/{number}"

    def idempotency_key(self, call: str) -> str:
        """The same key for this call in every attempt and every resumed run."""
        return digest([self.run_id, self.stage, call])[:32]

    async def claim(
        self, call: str, tool: str, arguments: Mapping[str, Any], result_type: Any
    ) -> Replay | InFlight | None:
        """Claim `call` before making it: None when this process claimed it and may make
        it; its recorded result when it completed; `InFlight` when it was claimed and
        has no result (it may have run).

        Raises `CheckpointError` when the ledger cannot be read or written: the caller
        must not act then, since the call may already have happened.
        """
        claim = getattr(self.store, "claim", None)
        if claim is None:
            # A store written before `claim`: results are recorded, calls not claimed.
            if not self._warned:
                self._warned = True
                self.log.warning("ledger_without_claim", store=repr(self.store))
            entry = await self.store.get(self.run_id, self.stage, call)
            return None if entry is None else self._replay(entry, result_type)
        claimed = {"tool": tool, "arguments": _kept(arguments)}
        winner: Checkpoint | None = await claim(self.run_id, self.stage, call, claimed)
        if winner is None:
            self.log.debug("ledger_claimed", call=call)
            return None
        if isinstance(winner.value, dict) and "result" not in winner.value:
            return InFlight(call=call, claimed_at=winner.saved_at)
        return self._replay(winner, result_type)

    def _replay(self, entry: Checkpoint, result_type: Any) -> Replay:
        recorded: _Recorded = read_as(self.store, entry, _Recorded, expected="a ledger entry")
        data = read_as(
            self.store, entry, result_type, part=recorded.result, what="its recorded result"
        )
        if recorded.masked:
            self.log.info("ledger_result_masked", call=entry.key)
        return Replay(data=data, call=entry.key)

    async def release(self, call: str) -> None:
        """Give up the claim of a call that failed without acting: it may be made again.

        A failure to release is logged: the claim stays, and the call then waits for a
        person instead of being made again, which is the safe way to be wrong.
        """
        try:
            await self.store.delete(self.run_id, self.stage, call)
        except Exception as exc:
            self.log.warning(
                "ledger_release_failed", call=call, error=f"{type(exc).__name__}: {exc}"
            )
        else:
            self.log.debug("ledger_released", call=call)

    async def record(self, call: str, tool: str, arguments: Mapping[str, Any], result: Any) -> None:
        """Record a completed call; a failure to record is logged, never raised.

        The side effect has happened: raising now would only invite a caller to act again.
        """
        try:
            clear_result = pydantic_core.to_jsonable_python(result, by_alias=True)
            stored_result = redact(clear_result)
            entry = {
                "tool": tool,
                "arguments": _kept(arguments),
                "result": stored_result,
                # `redact` returns its argument when there was nothing to mask.
                "masked": stored_result is not clear_result,
            }
            await self.store.put(self.run_id, self.stage, call, entry)
        except Exception as exc:
            self.log.warning("ledger_write_failed", call=call, error=f"{type(exc).__name__}: {exc}")
        else:
            self.log.debug("ledger_recorded", call=call)


async def claim_in(
    store: CheckpointStore, run_id: str, stage: str, key: str, value: object, *, purpose: str
) -> Checkpoint | None:
    """`store.claim(...)`, or a `UsageError` for a store written without `claim`.

    `purpose` says what needed the claim, for the message.
    """
    claim = getattr(store, "claim", None)
    if claim is None:
        raise UsageError(
            f"{purpose} must be claimed in the checkpoint store, but {store!r} has no "
            "claim() method (CheckpointStore.claim: save a value only where there is "
            "none, atomically); add one, or use SQLiteStore, PostgresStore or MemoryStore"
        )
    winner: Checkpoint | None = await claim(run_id, stage, key, value)
    return winner
