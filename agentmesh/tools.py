"""`@tool`: typed tools with validated input, a JSON schema, and side-effect flags.

A tool is an async function whose type hints become its JSON input schema. Inputs are
validated before the body runs, so bad input costs nothing and names the field. Two flags
tell the framework what a failure may have done:

* `idempotent=True`: calling twice is the same as once, so any transient failure may be
  retried.
* `idempotent=False` (the default): after a failure that may have taken effect (a
  timeout, a dropped connection) the tool is not re-invoked automatically, unless it
  accepts an `idempotency_key` parameter: then every attempt of one logical call gets the
  same key, and the tool (or the service behind it) can make the repeat harmless.

A tool that takes a `ctx` parameter is handed the calling subagent's `Context` (its run,
deadline and shared state); like `idempotency_key`, it is not part of the input schema.

Number inputs (`float`, `Decimal`, also inside containers and nested models) refuse NaN
and infinities: `"NaN" > 500` is false, so a policy rule on `amount > 500` would wave
one through. A parameter opts in with pydantic's own marker,
`Annotated[float, pydantic.AllowInfNan()]`; a nested model with `allow_inf_nan` in its
own `model_config` (or on its field) decides for itself.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Awaitable, Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any, Generic, ParamSpec, TypeVar, Unpack, get_args, get_type_hints, overload

import pydantic_core
from pydantic import AllowInfNan, BaseModel, ConfigDict, create_model
from pydantic.dataclasses import is_pydantic_dataclass

from agentmesh._signatures import kept_for_one_release, spell_out
from agentmesh._tool_options import Impact, MCPToolKwargs, ToolKwargs, ToolOptions
from agentmesh.breaker import CircuitBreaker
from agentmesh.errors import UsageError

__all__ = [
    "Impact",
    "MCPToolKwargs",
    "Tool",
    "ToolKwargs",
    "ToolOptions",
    "tool",
]

P = ParamSpec("P")
R = TypeVar("R")

# The parameters agentmesh fills in itself when a tool declares them (see the docstring).
_IDEMPOTENCY_KEY = "idempotency_key"
_CONTEXT_PARAMETER = "ctx"
_INJECTED = (_IDEMPOTENCY_KEY, _CONTEXT_PARAMETER)

# Exported before issue 25; the parameter names are the API, not these constants.
__getattr__ = kept_for_one_release(
    __name__,
    {
        "IDEMPOTENCY_KEY": ("is internal to agentmesh", lambda: _IDEMPOTENCY_KEY),
        "CONTEXT_PARAMETER": ("is internal to agentmesh", lambda: _CONTEXT_PARAMETER),
    },
)


class Tool(Generic[P, R]):
    """A typed, validated tool. Call it through `ctx.call(tool, ...)` inside a subagent.

    Calling the `Tool` object directly runs the function as written, with no validation,
    policies or retries, which is handy in the tool's own unit tests.
    """

    def __init__(self, fn: Callable[P, Awaitable[R]], **options: Unpack[ToolKwargs]) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise UsageError(
                f"@tool needs an async function (async def); {fn.__qualname__} is not. "
                "Wrap blocking code with asyncio.to_thread inside an async def."
            )
        self.fn = fn
        self.name = options.get("name") or fn.__name__
        self.options = checked = ToolOptions.of(self.name, options)
        self.description = checked.description or inspect.getdoc(fn) or self.name
        self.idempotent = checked.idempotent
        self.impact: Impact | None = checked.impact
        self.retry = checked.retry
        self.breaker = _named(checked.breaker, self.name)
        self.limiter = checked.limiter(self.name)
        self._signature = inspect.signature(fn)
        self.accepts_idempotency_key = _IDEMPOTENCY_KEY in self._signature.parameters
        self.accepts_context = _CONTEXT_PARAMETER in self._signature.parameters
        self.input_model = _input_model(fn, self._signature, self.name)
        # Only nested models escape the input model's allow_inf_nan=False; most tools have none.
        self._has_nested_models = _mentions_model(self.input_model)
        functools.update_wrapper(self, fn)

    @functools.cached_property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's input (without the injected `idempotency_key`, `ctx`)."""
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def to_anthropic_tool(self) -> dict[str, Any]:
        """The tool's definition for the Messages API `tools` list."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Name positional arguments, as the call would; raises TypeError on a mismatch."""
        if not args:
            return dict(kwargs)
        return dict(self._signature.bind_partial(*args, **kwargs).arguments)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and coerce `arguments`; raises pydantic's ValidationError naming fields."""
        model = self.input_model.model_validate(dict(arguments))
        if self._has_nested_models:
            _refuse_non_finite(model)
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def avalidate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """`validate` as the tool path calls it: a tool whose check may take long (an MCP
        tool's, against a server's schema) makes it without blocking the event loop."""
        return self.validate(arguments)

    async def invoke(
        self, arguments: Mapping[str, Any], *, idempotency_key: str | None, ctx: Any = None
    ) -> R:
        """Run the body with already validated arguments and the injected parameters."""
        kwargs = dict(arguments)
        if self.accepts_idempotency_key:
            kwargs[_IDEMPOTENCY_KEY] = idempotency_key
        if self.accepts_context:
            kwargs[_CONTEXT_PARAMETER] = ctx
        return await self.fn(**kwargs)  # type: ignore[call-arg]  # validated against fn's signature

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        flags = "idempotent" if self.idempotent else "not idempotent"
        impact = f", impact={self.impact}" if self.impact else ""
        return f"<Tool {self.name} ({flags}{impact})>"


def _input_model(
    fn: Callable[..., Any], signature: inspect.Signature, name: str
) -> type[BaseModel]:
    hints = _schema_hints(fn, name)
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UsageError(
                f"@tool {name}: *args and **kwargs cannot be described by a schema; "
                f"name the parameters ({param.name})"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise UsageError(f"@tool {name}: parameter {param.name} is positional-only")
        if param.name in _INJECTED:
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    model_name = "".join(part.capitalize() for part in name.split("_")) + "Input"
    # pydantic accepts "NaN" and "inf" for a float by default; a tool input must opt in.
    config = ConfigDict(extra="forbid", allow_inf_nan=False)
    model: type[BaseModel] = create_model(model_name, __config__=config, **fields)
    return model


# Deeper than this the walk stops: validated input may hold a self-referencing `Any` value.
_MAX_DEPTH = 32


def _mentions_model(model: type[BaseModel]) -> bool:
    """Whether a parameter's type names a pydantic model (anywhere inside it)."""
    return any(_names_model(field.annotation) for field in model.model_fields.values())


def _names_model(hint: Any) -> bool:
    if isinstance(hint, type) and (issubclass(hint, BaseModel) or is_pydantic_dataclass(hint)):
        return True
    return any(_names_model(arg) for arg in get_args(hint))


def _refuse_non_finite(model: BaseModel) -> None:
    """Raise pydantic's ValidationError for NaN or an infinity in a nested model.

    The input model's config does not reach a nested model, which has its own; one that
    says nothing about `allow_inf_nan` gets the tool's default, which is to refuse.
    """
    errors: list[pydantic_core.InitErrorDetails] = [
        {"type": "finite_number", "loc": loc, "input": value}
        for loc, value in _non_finite(model, (), judged=True, depth=0)
    ]
    if errors:
        raise pydantic_core.ValidationError.from_exception_data(type(model).__name__, errors)


Location = tuple[str | int, ...]


def _non_finite(
    value: Any, loc: Location, *, judged: bool, depth: int
) -> Iterator[tuple[Location, Any]]:
    """NaN and infinities under `value` that no model config has ruled on (`judged`)."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, float | Decimal):
        finite = math.isfinite(value) if isinstance(value, float) else value.is_finite()
        if not judged and not finite:
            yield loc, value
    elif isinstance(value, BaseModel):
        yield from _model_non_finite(value, loc, depth)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _non_finite(item, (*loc, str(key)), judged=judged, depth=depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield from _non_finite(item, (*loc, index), judged=judged, depth=depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        # A plain dataclass is validated under the config of the model around it; a
        # pydantic dataclass under its own, which rules only if it says so.
        if is_pydantic_dataclass(type(value)):
            config = getattr(type(value), "__pydantic_config__", None) or {}
            judged = "allow_inf_nan" in config
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            yield from _non_finite(item, (*loc, field.name), judged=judged, depth=depth + 1)


def _model_non_finite(
    model: BaseModel, loc: Location, depth: int
) -> Iterator[tuple[Location, Any]]:
    own_rule = "allow_inf_nan" in type(model).model_config
    for name, field in type(model).model_fields.items():
        judged = own_rule or any(isinstance(meta, AllowInfNan) for meta in field.metadata)
        item = getattr(model, name)
        yield from _non_finite(item, (*loc, name), judged=judged, depth=depth + 1)


def _named(breaker: CircuitBreaker | None, owner: str) -> CircuitBreaker | None:
    if breaker is not None and breaker.name is None:
        breaker.name = owner
    return breaker


def _schema_hints(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Type hints of the schema's parameters; injected ones need not resolve at runtime."""
    try:
        return get_type_hints(fn, include_extras=True)
    except NameError:
        pass
    # Typically `ctx: Context` imported under TYPE_CHECKING: resolve the others one by one.
    hints: dict[str, Any] = {}
    for param_name, annotation in inspect.get_annotations(fn).items():
        if param_name in _INJECTED or param_name == "return":
            continue

        def probe() -> None: ...

        probe.__annotations__ = {param_name: annotation}
        try:
            hints.update(get_type_hints(probe, globalns=fn.__globals__, include_extras=True))
        except NameError as exc:
            raise UsageError(
                f"@tool {name}: cannot resolve the type of {param_name}: {exc}"
            ) from exc
    return hints


@overload
def tool(fn: Callable[P, Awaitable[R]], /) -> Tool[P, R]: ...


@overload
def tool(**options: Unpack[ToolKwargs]) -> Callable[[Callable[P, Awaitable[R]]], Tool[P, R]]: ...


def tool(
    fn: Callable[P, Awaitable[R]] | None = None, /, **options: Unpack[ToolKwargs]
) -> Tool[P, R] | Callable[[Callable[P, Awaitable[R]]], Tool[P, R]]:
    """Make a typed tool from an async function; usable bare (`@tool`) or with options.

    Args:
        name: the tool's name (default: the function's).
        description: shown to models (default: the docstring).
        idempotent: whether repeating a call is harmless (see the module docstring).
        impact: "financial", "legal" or "safety": lets policies single out risky tools.
        retry: the tool's own retry policy; by default the calling subagent's.
        rate_limit: `(n, per_seconds)`: at most n calls per window, across all callers.
        max_concurrency: at most this many calls in flight at once.
        breaker: a `CircuitBreaker`: fail fast while the service behind the tool is down.
    """

    def make(func: Callable[P, Awaitable[R]]) -> Tool[P, R]:
        return Tool(func, **options)

    return make if fn is None else make(fn)


spell_out(Tool.__init__, ToolKwargs, ToolOptions)
spell_out(tool, ToolKwargs, ToolOptions)
