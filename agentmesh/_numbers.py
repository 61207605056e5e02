"""The one check of every number option: NaN, bools, strings and out-of-range values refused.

`nan <= 0` and `nan > 0` are both false, so a check written as a comparison lets NaN
through (a `timeout=nan` then turns every task into a gap); `"5" > 0` raises a bare
TypeError from deep inside. Every option goes through `whole` or `number` instead, and
the UsageError names the option.
"""

from __future__ import annotations

import math
import numbers
import operator
import re

from agentmesh.errors import UsageError

__all__ = ["duration_seconds", "number", "whole"]

# A Go duration, as OpenAI writes its rate-limit resets: "1s", "6m0s", "20ms", "1h2m3.5s".
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def whole(option: str, value: object, *, at_least: int) -> int:
    """`value` as an int >= `at_least`, or a UsageError naming `option`.

    `option` is how the user wrote it, e.g. `Coordinator(max_rounds=)`. Bools are
    refused: `max_attempts=True` is a mistake, not one attempt.
    """
    if type(value) is int or (isinstance(value, numbers.Integral) and not isinstance(value, bool)):
        whole_value = operator.index(value)
        if whole_value >= at_least:
            return whole_value
    raise _refused(option, value, f"an int >= {at_least}")


def number(
    option: str,
    value: object,
    *,
    at_least: float = 0.0,
    above: bool = False,
    at_most: float | None = None,
    infinite: bool = False,
    unit: str = "",
) -> float:
    """`value` as a float in range, or a UsageError naming `option`.

    Args:
        option: how the user wrote the option, e.g. `RetryPolicy(max_delay=)`.
        value: what was given.
        at_least: the smallest value allowed (excluded when `above`).
        above: the value must be strictly greater than `at_least`.
        at_most: the largest value allowed, if any.
        infinite: `float("inf")` is allowed (it means "no limit" there); NaN never is.
        unit: said in the message, e.g. "seconds".
    """
    if type(value) is float or type(value) is int or _real(value):
        real = float(value)  # type: ignore[arg-type]  # a Real, checked just above
        in_range = (real > at_least if above else real >= at_least) and (
            at_most is None or real <= at_most
        )
        if in_range and (math.isfinite(real) or (infinite and real == math.inf)):
            return real
    finite = "" if infinite else "finite "
    bound = f"{'>' if above else '>='} {at_least:g}"
    if at_most is not None:
        bound += f" and <= {at_most:g}"
    units = f" of {unit}" if unit else ""
    raise _refused(option, value, f"a {finite}number{units} {bound}")


def _real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _refused(option: str, value: object, requirement: str) -> UsageError:
    return UsageError(f"{option} must be {requirement}, got {value!r}")


def duration_seconds(value: str | None) -> float | None:
    """A Go duration (`6m0s`, `20ms`) in seconds; None when `value` is no such duration."""
    if not value:
        return None
    value = value.strip()
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(amount + unit for amount, unit in parts) != value:
        return None
    return sum(float(amount) * _UNIT_SECONDS[unit] for amount, unit in parts)
