"""What the public surface shows beyond the code: signatures and names kept for a release.

`help()` shows the options a `**options: Unpack[...]` signature stands for;
`kept_for_one_release` serves a module's renamed or internal names, with a warning;
`loaded_at_first_use` serves public names whose modules are imported only when used.

The options are defined once, as a TypedDict and its checked dataclass; the constructors
take them as `**options` so that a new option is not a parameter in every signature.
`inspect.signature` (and so `help()` and IDEs that ask it) would show only `**options`:
`spell_out` gives the function a `__signature__` with each option as a keyword argument.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ForwardRef

__all__ = ["kept_for_one_release", "loaded_at_first_use", "spell_out"]

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


def loaded_at_first_use(
    module: str, homes: Mapping[str, str], *, first: str | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's `__getattr__` and `__dir__` (PEP 562) for names imported at first use.

    `homes` maps each name to the module that defines it: importing that module (a
    vendor SDK, or a circle) waits until the name is used, and the value is then kept
    in `module`, so later uses do not come here. `first` is imported before any home
    (the one that says which extra to install when an SDK is missing). `dir()` lists
    the names before they are loaded.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        if first is not None:
            importlib.import_module(first)
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module])) | set(homes))

    return __getattr__, __dir__
