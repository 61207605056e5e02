"""Partial results of one task: recorded across attempts without duplicates, merged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pydantic_core

from agentmesh.envelope import MAX_PARTIAL_JSON_BYTES, PartialResults
from agentmesh.errors import UsageError

__all__ = ["PartialRecorder", "merge_partials"]


class PartialRecorder:
    """Progress of one task across all its attempts, without duplicates."""

    __slots__ = ("_completed", "_findings", "_json_bytes", "_pending")

    def __init__(self) -> None:
        self._completed: dict[str, None] = {}
        self._pending: dict[str, None] = {}
        # By dedup key, in the order recorded: one container, not a list and a set (an
        # empty set alone is 216 bytes, kept by every task in flight).
        self._findings: dict[bytes, Any] = {}
        self._json_bytes = 0  # of the findings, known from their dedup keys

    def record(
        self,
        findings: Iterable[Any] | Any = (),
        *,
        completed: str | Iterable[str] | None = None,
        pending: str | Iterable[str] | None = None,
    ) -> None:
        # A dict or a string is one finding; iterating it would record keys or characters.
        items = [findings] if isinstance(findings, dict | str | bytes) else findings
        if not isinstance(items, Iterable):
            items = [items]
        for item in items:
            try:
                key = pydantic_core.to_json(item, fallback=repr)
            except pydantic_core.PydanticSerializationError:
                key = repr(item).encode()
            if key not in self._findings:
                self._findings[key] = item
                self._json_bytes += len(key) + 1
        for name in _as_names(pending, "pending"):
            if name not in self._completed:
                self._pending[name] = None
        for name in _as_names(completed, "completed"):
            self._completed[name] = None
            self._pending.pop(name, None)

    @property
    def completed(self) -> tuple[str, ...]:
        """The sources done so far, including those restored from a checkpoint."""
        return tuple(self._completed)

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    @property
    def findings(self) -> tuple[Any, ...]:
        return tuple(self._findings.values())

    def snapshot(self) -> PartialResults | None:
        """The progress so far, or None when nothing was recorded."""
        if not (self._completed or self._pending or self._findings):
            return None
        completed, pending = tuple(self._completed), tuple(self._pending)
        findings = tuple(self._findings.values())
        if self._json_bytes <= MAX_PARTIAL_JSON_BYTES:
            # Within the bound, which the dedup keys already measured: validating would
            # serialise every finding again, on every snapshot (quadratic over a run).
            return PartialResults.model_construct(
                completed=completed, pending=pending, findings=findings
            )
        # Over it: the validator cuts the findings and says so.
        return PartialResults(completed=completed, pending=pending, findings=findings)

    def at_rest(self) -> dict[str, Any] | None:
        """The progress so far as JSON data, as `snapshot()` dumps (None when nothing was
        recorded): without building the model when the findings are within the bound."""
        if self._json_bytes > MAX_PARTIAL_JSON_BYTES:  # the validator cuts them: use it
            snapshot = self.snapshot()
            return None if snapshot is None else snapshot.model_dump(mode="json", by_alias=True)
        if not (self._completed or self._pending or self._findings):
            return None
        findings = pydantic_core.to_jsonable_python(tuple(self._findings.values()), by_alias=True)
        return {"completed": [*self._completed], "pending": [*self._pending], "findings": findings}


def merge_partials(*blocks: PartialResults | None) -> PartialResults | None:
    """One block from several, in order, without duplicates; None when all are None."""
    merged = PartialRecorder()
    for block in blocks:
        if block is not None:
            merged.record(block.findings, completed=block.completed, pending=block.pending)
    return merged.snapshot()


def _as_names(value: str | Iterable[str] | None, argument: str) -> Iterable[str]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    names = tuple(value)
    if not all(isinstance(name, str) for name in names):
        raise UsageError(f"record_partial({argument}=) takes source names (str), got {names!r}")
    return names
