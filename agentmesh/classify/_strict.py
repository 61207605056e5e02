"""Strict mode: a programming error re-raised with its traceback, not made an envelope.

The process-wide switch (`set_strict`, `strict()`, the `AGENTMESH_STRICT` variable) and
what counts as a programming error; the `Classifier` says whether one of its mappings
claims the exception.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from agentmesh.errors import UsageError

__all__ = ["is_strict", "set_strict", "strict"]


PROGRAMMING_ERRORS: tuple[type[Exception], ...] = (
    AttributeError,
    NameError,
    TypeError,
    AssertionError,
)
"""What strict mode re-raises: bugs in the code itself. `KeyError`, `IndexError` and
`ValueError` are left out: they as often describe the data (a response without the
expected key) as the code."""

_STRICT_VARIABLE = "AGENTMESH_STRICT"


class _StrictSetting:
    """The process-wide strict switch; None follows `AGENTMESH_STRICT`.

    One attribute, assigned whole: no lock is needed, and it is read only on the
    failure path, so the environment is looked up then, not at import.
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: bool | None = None


_STRICT = _StrictSetting()


def is_strict() -> bool:
    """Whether strict mode is on: the last `set_strict`, else `AGENTMESH_STRICT=1`."""
    if _STRICT.value is not None:
        return _STRICT.value
    return os.environ.get(_STRICT_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def set_strict(on: bool | None) -> None:
    """Turn strict mode on or off for the process; None follows `AGENTMESH_STRICT` again.

    In strict mode a programming error (`AttributeError`, `NameError`, `TypeError`,
    `AssertionError`) that escapes a subagent's body or a tool's function, and that the
    classifier has no mapping for, propagates out of `Subagent.run` and `Coordinator.run`
    with its original traceback, instead of becoming an `other` envelope. Meant for
    development and tests, not production.
    """
    if on is not None and not isinstance(on, bool):
        raise UsageError(f"set_strict(on=) takes True, False or None, got {on!r}")
    _STRICT.value = on


@contextlib.contextmanager
def strict(on: bool = True) -> Iterator[None]:
    """`set_strict(on)` for a block; the previous setting is restored afterwards."""
    previous = _STRICT.value
    set_strict(on)
    try:
        yield
    finally:
        _STRICT.value = previous
