"""What one task's model calls used, added up call by call (as `RetryTally` does its
retries): the usage its outcome carries."""

from __future__ import annotations

from typing import Any

from agentmesh.usage import ModelFailover, ModelUsage, UsageSummary

__all__ = ["UsageTally"]


class UsageTally:
    """The model usage of one task (its `Context`), added up call by call.

    Nothing is kept until a model is called, so a task that calls none pays nothing.
    """

    __slots__ = ("_failovers", "_lines")

    def __init__(self) -> None:
        self._lines: list[ModelUsage] | None = None
        self._failovers: list[ModelFailover] | None = None

    def add(self, line: ModelUsage) -> None:
        if self._lines is None:
            self._lines = []
        self._lines.append(line)

    def failed_over(self, failover: ModelFailover) -> None:
        if self._failovers is None:
            self._failovers = []
        self._failovers.append(failover)

    def merge(self, summary: UsageSummary | None) -> None:
        """Add usage already on an outcome (a nested subagent's)."""
        if summary is None:
            return
        for line in summary.by_model:
            self.add(line)
        for failover in summary.failovers:
            self.failed_over(failover)

    def summary(self) -> UsageSummary | None:
        """The task's usage so far; None when no model was called."""
        if self._lines is None and self._failovers is None:
            return None
        return UsageSummary.of(self._lines or (), self._failovers or ())

    def __repr__(self) -> str:
        summary: Any = self.summary()
        return f"<UsageTally {summary!r}>"
