"""Routes: what the coordinator does with one outcome. Typed values, not strings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from agentmesh.task import Task

__all__ = [
    "Accept",
    "AcceptEmpty",
    "Escalate",
    "RecordGap",
    "RetryWithFeedback",
    "Route",
    "TryAlternative",
]


@dataclass(frozen=True, slots=True)
class Accept:
    """A result with data: the topic is covered."""


@dataclass(frozen=True, slots=True)
class AcceptEmpty:
    """A valid empty result: "searched, nothing found". Never retried."""


@dataclass(frozen=True, slots=True)
class RetryWithFeedback:
    """Try again with a corrected task that carries the failed attempt as feedback."""

    task: Task


@dataclass(frozen=True, slots=True)
class TryAlternative:
    """Try the named alternative approach instead."""

    name: str


@dataclass(frozen=True, slots=True)
class Escalate:
    """Hand it to a human: no new attempt of any kind."""

    reason: str


@dataclass(frozen=True, slots=True)
class RecordGap:
    """Give up on this task and say so in the report, with why and whether a retry could help."""

    reason: str


Route: TypeAlias = Accept | AcceptEmpty | RetryWithFeedback | TryAlternative | Escalate | RecordGap
"""One of the coordinator's routes: what a `Router` returns for an outcome."""
