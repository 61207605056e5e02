"""The suite's one fast retry policy: fixed, recorded delays that no test waits out."""

from __future__ import annotations

from typing import Any

from agentmesh import RetryPolicy
from agentmesh.testing import RecordingSleep


def fast_retry(
    sleep: RecordingSleep | None = None, *, attempts: int = 3, **options: Any
) -> RetryPolicy:
    """`attempts` attempts, waits of 0.1 s doubling without jitter, recorded by `sleep`.

    Without jitter the delays a test asserts are exact; pass `sleep` to read them, and any
    other `RetryPolicy` option (`max_delay=`, `timeout=`, ...) to override the defaults.
    """
    settings: dict[str, Any] = {"initial_delay": 0.1, "jitter": "none"} | options
    return RetryPolicy(max_attempts=attempts, sleep=sleep or RecordingSleep(), **settings)
