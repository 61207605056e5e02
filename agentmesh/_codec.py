"""How a checkpoint value is written (JSON) and read back (JSON, or a typed value).

The stores, the task engine's ledger, the pipeline and a coordinator's resume all read
stored values through here, so a damaged record is the same `CheckpointError` naming
the store, the run and the key wherever it is read.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar, get_args, get_origin

import pydantic
import pydantic_core

from agentmesh.envelope import ErrorEnvelope, Success
from agentmesh.errors import CheckpointError, UsageError

__all__ = [
    "SCHEMA_VERSION",
    "damaged",
    "declared_output_type",
    "decode",
    "encode",
    "read_as",
    "revive",
]

T = TypeVar("T")

SCHEMA_VERSION = 1
"""The layout of the store and of every record; a reader refuses any other version."""


class Stored(Protocol):
    """A stored value and where it belongs, as `read_as` reads it (a `Checkpoint`)."""

    @property
    def run_id(self) -> str: ...
    @property
    def stage(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> Any: ...


def damaged(store: object, run_id: str, stage: str, key: str, why: str) -> CheckpointError:
    """The error for one stored record that cannot be read: which store, run and key, and why."""
    where = repr(store)
    path = getattr(store, "path", None)
    return CheckpointError(
        f"checkpoint {run_id}/{stage}/{key} in {where} cannot be read: {why}",
        path=path if isinstance(path, Path) else None,
        store=where,
        run_id=run_id,
        stage=stage,
        key=key,
    )


def encode(value: object, *, what: str) -> str:
    """The JSON text of `value`; a pydantic model is dumped by alias, so it validates back."""
    try:
        return pydantic_core.to_json(value, by_alias=True).decode()
    except pydantic_core.PydanticSerializationError as exc:
        raise UsageError(f"{what} is not JSON-serialisable: {exc}") from None


def decode(text: str) -> Any:
    return json.loads(text)


_WHOLE: Final = object()


def read_as(
    store: object,
    checkpoint: Stored,
    shape: Any,
    *,
    part: Any = _WHOLE,
    what: str = "it",
    expected: str | None = None,
) -> Any:
    """A stored value validated as `shape` (any type pydantic knows; None keeps it as is).

    `part` is a piece of the checkpoint's value to read instead of all of it; `what`
    names the value and `expected` its shape in the error (by default the type's name).
    A value that does not fit (a damaged row, or one other code wrote) raises
    `CheckpointError` naming `store`, the run and the key, and why.
    """
    value = checkpoint.value if part is _WHOLE else part
    if shape is None:
        return value
    try:
        return _adapter(shape).validate_python(value)
    except pydantic.ValidationError as exc:
        why = f"{what} is not {expected or _type_name(shape)} ({_problems(exc)})"
        raise damaged(store, checkpoint.run_id, checkpoint.stage, checkpoint.key, why) from None


def _problems(exc: pydantic.ValidationError) -> str:
    # Where and what, without the input values: pydantic's full text repeats them.
    shown = [
        f"{'.'.join(map(str, error['loc'])) or 'the value'}: {error['msg']}"
        for error in exc.errors(include_url=False, include_input=False)[:3]
    ]
    more = exc.error_count() - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def revive(value: Any, as_type: Any, *, what: str) -> Any:
    """`value` (JSON data) validated as `as_type`; unchanged when `as_type` is None."""
    if as_type is None:
        return value
    try:
        return _adapter(as_type).validate_python(value)
    except pydantic.ValidationError as exc:
        raise CheckpointError(
            f"{what} does not validate as {_type_name(as_type)} (was the code changed since "
            f"it was saved? delete the checkpoint to recompute it): {exc}"
        ) from None


def declared_output_type(fn: Callable[..., Any]) -> Any:
    """The return annotation of `fn`, used to read its checkpointed output back typed.

    None (keep the JSON as it is) when there is no usable annotation, when it is `Any`,
    or when it is an outcome: a stage that returns a subagent's outcome passes its data on.
    """
    try:
        return _cached_output_type(fn)
    except TypeError:  # an unhashable callable
        return _output_type(fn)


@functools.lru_cache(maxsize=1024)
def _cached_output_type(fn: Callable[..., Any]) -> Any:
    return _output_type(fn)


def _output_type(fn: Callable[..., Any]) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    # An object with an async __call__: the annotation is on the method of its class.
    target = inspect.unwrap(fn if inspect.isroutine(fn) else type(fn).__call__)
    try:
        hint = typing.get_type_hints(target).get("return")
    except Exception:  # an annotation that cannot be resolved only costs the typed read-back
        return None
    if hint is None or hint is Any or _mentions_outcome(hint):
        return None
    return hint


def _mentions_outcome(hint: Any) -> bool:
    if isinstance(hint, type) and issubclass(hint, Success | ErrorEnvelope):
        return True
    origin = get_origin(hint)
    if isinstance(origin, type) and issubclass(origin, Success | ErrorEnvelope):
        return True
    return any(_mentions_outcome(arg) for arg in get_args(hint))


@functools.lru_cache(maxsize=256)
def _cached_adapter(as_type: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(as_type)


def _adapter(as_type: Any) -> pydantic.TypeAdapter[Any]:
    try:
        return _cached_adapter(as_type)
    except TypeError:  # an unhashable annotation: build it each time
        return pydantic.TypeAdapter(as_type)


def _type_name(as_type: Any) -> str:
    if get_origin(as_type) is typing.Annotated:  # a type with checks: named by the type
        as_type = get_args(as_type)[0]
    return getattr(as_type, "__qualname__", None) or repr(as_type)
