"""Faults on demand: `--inject SOURCE=KIND[@PROBABILITY]`, what the option means.

`injection.FaultInjector` raises them inside a source's tools. This module needs no
framework, so that a mistyped option is reported before anything heavy is imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["KINDS", "Fault", "FaultKind", "parse_fault"]

FaultKind = Literal["timeout", "rate_limit", "unavailable", "permission", "invalid", "empty"]
KINDS: tuple[str, ...] = get_args(FaultKind)


@dataclass(frozen=True, slots=True)
class Fault:
    """One `--inject` rule: which source fails, how, and how often."""

    source: str
    kind: FaultKind
    probability: float = 1.0

    def __str__(self) -> str:
        chance = "" if self.probability == 1 else f"@{self.probability:g}"
        return f"{self.source}={self.kind}{chance}"


def parse_fault(text: str, sources: Iterable[str]) -> Fault:
    """Parse `SOURCE=KIND[@PROBABILITY]`; raises ValueError with a message for the user."""
    known = tuple(sources)
    source, sep, rest = text.partition("=")
    if not sep or not source or not rest:
        raise ValueError(f"--inject {text!r}: expected SOURCE=KIND[@PROBABILITY]")
    if source not in known:
        raise ValueError(f"--inject {text!r}: unknown source {source!r}; known: {', '.join(known)}")
    kind, at, chance = rest.partition("@")
    if kind not in KINDS:
        raise ValueError(
            f"--inject {text!r}: unknown fault kind {kind!r}; known: {', '.join(KINDS)}"
        )
    probability = 1.0
    if at:
        try:
            probability = float(chance)
        except ValueError:
            raise ValueError(f"--inject {text!r}: probability {chance!r} is not a number") from None
        if not 0 <= probability <= 1:
            raise ValueError(f"--inject {text!r}: probability {chance} is outside 0..1")
    return Fault(source=source, kind=kind, probability=probability)  # type: ignore[arg-type]  # checked against KINDS
