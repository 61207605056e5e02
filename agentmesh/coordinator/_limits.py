"""`RunLimits`: how far a coordinator's run may go, as one value."""

from __future__ import annotations

from dataclasses import dataclass

from agentmesh._numbers import number, whole
from agentmesh.errors import UsageError
from agentmesh.usage import UsageLimits

__all__ = ["RunLimits"]


@dataclass(frozen=True, slots=True)
class RunLimits:
    """The limits of a coordinator's runs, checked once (`Coordinator(limits=...)`).

    Args:
        concurrency: subagent runs in flight at once.
        timeout: seconds for a whole run; its deadline bounds every call and backoff.
            None: no deadline.
        rounds: rewrite rounds per task.
        min_coverage: the share of entries that must be answered for the report to be
            sufficient (e.g. 0.8); None: any.
        usage: `UsageLimits` on what the run's model calls may use together.
    """

    concurrency: int = 64
    timeout: float | None = None
    rounds: int = 3
    min_coverage: float | None = None
    usage: UsageLimits | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: the checked values replace the given ones
        set_(self, "concurrency", whole("RunLimits(concurrency=)", self.concurrency, at_least=1))
        if self.timeout is not None:
            timeout = number("RunLimits(timeout=)", self.timeout, above=True, unit="seconds")
            set_(self, "timeout", timeout)
        set_(self, "rounds", whole("RunLimits(rounds=)", self.rounds, at_least=0))
        if self.min_coverage is not None:
            set_(
                self,
                "min_coverage",
                number("RunLimits(min_coverage=)", self.min_coverage, at_most=1),
            )
        if self.usage is not None and not isinstance(self.usage, UsageLimits):
            raise UsageError(f"RunLimits(usage=) takes UsageLimits, got {self.usage!r}")

    @classmethod
    def of(
        cls,
        limits: RunLimits | None,
        *,
        max_concurrency: int,
        timeout: float | None,
        max_rounds: int,
        min_coverage: float | None,
        usage_limits: UsageLimits | None,
    ) -> RunLimits:
        """The limits a `Coordinator` was given: `limits=`, or its plain keywords.

        A plain keyword given beside `limits=` is refused: one of them would be ignored.
        """
        plain = {
            "max_concurrency": (max_concurrency, 64),
            "timeout": (timeout, None),
            "max_rounds": (max_rounds, 3),
            "min_coverage": (min_coverage, None),
            "usage_limits": (usage_limits, None),
        }
        if limits is None:
            try:
                return cls(max_concurrency, timeout, max_rounds, min_coverage, usage_limits)
            except UsageError as exc:  # name the keyword the user wrote
                raise UsageError(_as_keyword(str(exc))) from None
        if not isinstance(limits, RunLimits):
            raise UsageError(f"Coordinator(limits=) takes RunLimits, got {limits!r}")
        given = [name for name, (value, default) in plain.items() if value is not default]
        if given:
            raise UsageError(
                f"Coordinator(limits=) and Coordinator({given[0]}=) both given; "
                "put every limit in RunLimits"
            )
        return limits


_KEYWORDS = {
    "RunLimits(concurrency=)": "Coordinator(max_concurrency=)",
    "RunLimits(timeout=)": "Coordinator(timeout=)",
    "RunLimits(rounds=)": "Coordinator(max_rounds=)",
    "RunLimits(min_coverage=)": "Coordinator(min_coverage=)",
    "RunLimits(usage=)": "Coordinator(usage_limits=)",
}


def _as_keyword(message: str) -> str:
    for field_name, keyword in _KEYWORDS.items():
        message = message.replace(field_name, keyword)
    return message
