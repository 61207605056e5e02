"""`Task`: one unit of work handed to a subagent."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentmesh.envelope import ErrorEnvelope

__all__ = ["Task"]


class Task(BaseModel):
    """What to do: a query, the topic it covers, and optionally which subagent does it.

    `feedback` is set by the coordinator when it retries a task with a rewritten query:
    it carries the envelope of the attempt that failed, so the subagent (or its model)
    can see what went wrong.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    query: str
    topic: str | None = None
    subagent: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    feedback: ErrorEnvelope | None = None
    id: str | None = None

    def with_query(self, query: str, *, feedback: ErrorEnvelope | None = None) -> Task:
        """The same task asking `query` instead, carrying `feedback` from the failed try."""
        return self.model_copy(update={"query": query, "feedback": feedback})

    @property
    def label(self) -> str:
        """The topic, or the query when the task has no topic."""
        return self.topic if self.topic is not None else self.query
