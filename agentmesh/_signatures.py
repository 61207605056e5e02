"""What the public surface shows beyond the code: signatures and names kept for a release.

`help()` shows the options a `**options: Unpack[...]` signature stands for;
`kept_for_one_release` serves a module's renamed or internal names, with a warning.

The options are defined once, as a TypedDict and its checked dataclass; the constructors
take them as `**options` so that a new option is not a parameter in every signature.
`inspect.signature` (and so `help()` and IDEs that ask it) would show only `**options`:
`spell_out` gives the function a `__signature__` with each option as a keyword argument.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ForwardRef

__all__ = ["kept_for_one_release", "spell_out"]

_KEYWORD = inspect.Parameter.KEYWORD_ONLY


def spell_out(function: Callable[..., Any], keywords: type, defaults: type | None = None) -> None:
    """Replace `function`'s `**options` by the keys of TypedDict `keywords`.

    Each key is keyword-only, annotated as in `keywords`, with the default of the field
    of the same name in dataclass `defaults`, or None where the option takes None (as
    "the default"; without `defaults`, every option must).
    """
    signature = inspect.signature(function)
    fields = {} if defaults is None else {f.name: f.default for f in dataclasses.fields(defaults)}
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    taken = {p.name for p in kept}
    spelled = []
    for name, annotation in keywords.__annotations__.items():
        if name in taken:
            continue
        hint = annotation.__forward_arg__ if isinstance(annotation, ForwardRef) else annotation
        default = None if str(hint).endswith("| None") else fields[name]
        spelled.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint
            )
        )
    function.__signature__ = signature.replace(parameters=[*kept, *spelled])  # type: ignore[attr-defined]


def kept_for_one_release(
    module: str, names: Mapping[str, tuple[str, Callable[[], Any]]]
) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) that still serves names a module no longer exports.

    `names` maps each old name to what the warning says of it (e.g. "is now Route") and a
    function giving its value; any other name is an `AttributeError`, as without it.
    """

    def __getattr__(name: str) -> Any:
        kept = names.get(name)
        if kept is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        says, value = kept
        warnings.warn(
            f"{module}.{name} {says}; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return value()

    return __getattr__
