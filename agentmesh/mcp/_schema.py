"""An MCP server's input schema, checked before it is used and evaluated in bounded time.

The schema comes from a server we do not control. At listing, a schema is unusable when it
is not valid JSON Schema, when a `$ref` cannot be resolved within it (nothing is fetched),
when references loop without going into the input (`{"$ref": "#"}`: checking any input
would never end), or when a subschema switches dialect with `$schema` (which would leave
the bounded keywords below). Such a tool is not offered, and its calls fail `invalid_schema`.

Arguments are then checked so that no schema can freeze the event loop:
- regular expressions (`pattern`, `patternProperties`, and so `additionalProperties`) run
  on the Rust `regex` engine of pydantic-core, in time linear in the input: no
  backtracking, so `^(a+)+$` costs what `^a+$` does. A pattern that engine cannot run
  (look-around, back-references) is not checked here but by the server, which checks
  its own input; it is logged at listing;
- the check runs in a worker thread, never on the loop, and gives up after
  `CHECK_SECONDS` (every keyword looks at the clock): over that, the call is refused as
  invalid input saying why, and the server is not called.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import pydantic_core
from pydantic_core import SchemaValidator, core_schema

__all__ = ["CHECK_SECONDS", "CheckedSchema", "check_arguments", "check_arguments_off_loop"]

CHECK_SECONDS: Final = 1.0
# Arguments nested deeper than this are refused before any check: the validator recurses
# a few frames per level, and a time limit alone would name the wrong cause on a slow machine.
MAX_DEPTH: Final = 200
"""How long checking one call's arguments may take: valid input takes microseconds."""

# Keywords that apply a subschema to the same instance: a loop of these never ends.
_IN_PLACE_ONE: Final = ("not", "if", "then", "else", "extends")  # draft 3's extends
_IN_PLACE_MANY: Final = ("allOf", "anyOf", "oneOf", "extends")
_IN_PLACE_MAP: Final = ("dependentSchemas", "dependencies")
_REFERENCES: Final = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords that apply a subschema to a part of the instance (a loop through them ends
# with the input).
_INTO_ONE: Final = (
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "items",
)
_INTO_MANY: Final = ("prefixItems", "items")
_INTO_MAP: Final = ("properties", "patternProperties")

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "agentmesh_mcp_schema_deadline", default=None
)
_workers: ThreadPoolExecutor | None = None


class SchemaTooCostly(Exception):
    """Checking the arguments took longer than `CHECK_SECONDS`."""


@dataclasses.dataclass(frozen=True, slots=True)
class CheckedSchema:
    """A server's input schema as the tool uses it: its validator, or why there is none."""

    validator: Any  # a jsonschema validator; jsonschema ships no type information
    problem: str | None
    unchecked_patterns: tuple[str, ...]  # left to the server: the linear engine cannot run them

    @classmethod
    def of(cls, schema: Mapping[str, Any]) -> CheckedSchema:
        """Check `schema` and build its bounded validator (or say why it is unusable)."""
        from jsonschema import SchemaError
        from jsonschema.validators import validator_for
        from referencing import Registry

        base = validator_for(schema, default=_latest())
        try:
            base.check_schema(schema)
        except SchemaError as exc:
            return cls(None, f"not valid JSON Schema: {exc.message}", ())
        except RecursionError:
            return cls(None, "nested too deeply to be checked", ())
        walk = _Walk(schema, base)
        problem = walk.problem()
        if problem is not None:
            return cls(None, problem, ())
        unchecked = tuple(p for p in walk.patterns if _matcher(p) is None)
        bounded = _bounded(base, skip_unevaluated=walk.unevaluated_with_patterns)
        # No registry of remote documents: a `$ref` resolves within the schema, never online.
        return cls(bounded(schema, registry=Registry()), None, unchecked)


def check_arguments(validator: Any, arguments: dict[str, Any]) -> list[Any]:
    """The schema's errors for `arguments`, within `CHECK_SECONDS`, on this thread.

    Raises `SchemaTooCostly` past the limit, `RecursionError` for input nested too deeply.
    """
    if _deeper_than(arguments, MAX_DEPTH):
        raise RecursionError(f"the arguments are nested more than {MAX_DEPTH} levels deep")
    token = _deadline.set(time.monotonic() + CHECK_SECONDS)
    try:
        return list(validator.iter_errors(arguments))
    finally:
        _deadline.reset(token)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests lists or objects more than `limit` levels deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, Mapping):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1) for child in item)
    return False


async def check_arguments_off_loop(validator: Any, arguments: dict[str, Any]) -> list[Any]:
    """`check_arguments` in a worker thread: the event loop runs on meanwhile."""
    global _workers  # made at first use, shared: two threads, never more
    if _workers is None:
        _workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="agentmesh-mcp-schema")
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_workers, check_arguments, validator, arguments)


@functools.lru_cache(maxsize=1024)
def _matcher(pattern: str) -> SchemaValidator | None:
    """`pattern` on the linear-time engine (search semantics, as JSON Schema's), or None."""
    try:
        return SchemaValidator(core_schema.str_schema(pattern=pattern, strict=True))
    except pydantic_core.SchemaError:
        return None


def _matches(pattern: str, text: str) -> bool | None:
    """Whether `text` matches; None when the pattern is left to the server."""
    matcher = _matcher(pattern)
    return None if matcher is None else matcher.isinstance_python(text)


def _tick() -> None:
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise SchemaTooCostly(f"checking the arguments took more than {CHECK_SECONDS} s")


def _latest() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator


# --- the bounded keywords ----------------------------------------------------------------

Keyword = Callable[[Any, Any, Any, Any], Iterator[Any] | None]


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and _matches(pattern, instance) is False:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(original: Keyword) -> Keyword:
    def additional(validator: Any, allowed: Any, instance: Any, schema: Any) -> Any:
        if "patternProperties" not in schema or not validator.is_type(instance, "object"):
            return original(validator, allowed, instance, schema)
        return _additional_with_patterns(validator, allowed, instance, schema)

    return additional


def _additional_with_patterns(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema import ValidationError

    properties = schema.get("properties", {})
    patterns = list(schema["patternProperties"])
    # A key that an unchecked pattern might match is not called extra here.
    extras = [
        key
        for key in instance
        if key not in properties and not any(_matches(p, key) is not False for p in patterns)
    ]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        joined = ", ".join(repr(each) for each in sorted(extras))
        verb = "does" if len(extras) == 1 else "do"
        shown = ", ".join(repr(each) for each in sorted(patterns))
        yield ValidationError(f"{joined} {verb} not match any of the regexes: {shown}")


def _unchecked(validator: Any, value: Any, instance: Any, schema: Any) -> None:
    """A keyword left to the server (its jsonschema form would run patterns unbounded)."""


def _ticking(keyword: Keyword) -> Keyword:
    def bounded(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _tick()
        return keyword(validator, value, instance, schema)

    return bounded


@functools.cache
def _bounded(base: Any, *, skip_unevaluated: bool) -> Any:
    """`base`'s validator class with the bounded keywords, every one of them timed."""
    from jsonschema.validators import extend

    keywords: dict[str, Keyword] = dict(base.VALIDATORS)
    keywords["pattern"] = _pattern
    if "patternProperties" in keywords:
        keywords["patternProperties"] = _pattern_properties
    if "additionalProperties" in keywords:
        keywords["additionalProperties"] = _additional_properties(keywords["additionalProperties"])
    if skip_unevaluated and "unevaluatedProperties" in keywords:
        # It re-evaluates patternProperties with Python's backtracking engine.
        keywords["unevaluatedProperties"] = _unchecked
    return extend(base, {name: _ticking(keyword) for name, keyword in keywords.items()})


# --- the checks at listing -----------------------------------------------------------------


class _Walk:
    """Every subschema reachable from the root, through applicators and references."""

    def __init__(self, schema: Mapping[str, Any], base: Any) -> None:
        # The meta-schemas, which jsonschema's validators resolve too (no type information).
        from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012, specification_with

        dialect = base.ID_OF(base.META_SCHEMA) or ""
        self._spec = specification_with(dialect, default=DRAFT202012)
        self._root = schema
        resource = self._create(schema)
        self._resolver = REGISTRY.combine(Registry()).resolver_with_root(resource)
        self.patterns: list[str] = []
        self.unevaluated_with_patterns = False

    def _create(self, contents: Any) -> Any:
        return self._spec.create_resource(contents)

    def problem(self) -> str | None:
        """Why the schema cannot be used, or None; collects its patterns on the way."""
        from referencing.exceptions import Unresolvable

        # node id -> (schema, resolver, in-place successors as (node id, how))
        nodes: dict[int, tuple[Any, Any, list[tuple[int, str]]]] = {}
        todo: list[tuple[Any, Any]] = [(self._root, self._resolver)]
        uses_unevaluated = uses_pattern_properties = False
        while todo:
            schema, resolver = todo.pop()
            if not isinstance(schema, dict) or id(schema) in nodes:
                continue
            if schema is not self._root and "$schema" in schema:
                return f"a subschema switches dialect ($schema {schema['$schema']!r})"
            if schema is not self._root and _has_id(schema):
                resolver = resolver.in_subresource(self._create(schema))
            in_place: list[tuple[int, str]] = []
            nodes[id(schema)] = (schema, resolver, in_place)
            for keyword in _REFERENCES:
                ref = schema.get(keyword)
                if not isinstance(ref, str):
                    continue
                try:
                    resolved = resolver.lookup(ref)
                except Unresolvable:
                    return (
                        f"its {keyword} {ref!r} cannot be resolved within the schema "
                        "(remote references are not fetched)"
                    )
                if isinstance(resolved.contents, dict):
                    in_place.append((id(resolved.contents), f"{keyword} {ref!r}"))
                    todo.append((resolved.contents, resolved.resolver))
            for child in _in_place(schema):
                if isinstance(child, dict):
                    in_place.append((id(child), "a subschema"))
                todo.append((child, resolver))
            todo.extend((child, resolver) for child in _into(schema))
            if isinstance(schema.get("pattern"), str):
                self.patterns.append(schema["pattern"])
            if isinstance(schema.get("patternProperties"), dict):
                self.patterns.extend(schema["patternProperties"])
                uses_pattern_properties = True
            uses_unevaluated = uses_unevaluated or "unevaluatedProperties" in schema
        self.unevaluated_with_patterns = uses_unevaluated and uses_pattern_properties
        return _loop(nodes)


def _has_id(schema: dict[str, Any]) -> bool:
    return isinstance(schema.get("$id"), str) or isinstance(schema.get("id"), str)


def _in_place(schema: dict[str, Any]) -> Iterator[Any]:
    return _subschemas(schema, _IN_PLACE_ONE, _IN_PLACE_MANY, _IN_PLACE_MAP)


def _into(schema: dict[str, Any]) -> Iterator[Any]:
    return _subschemas(schema, _INTO_ONE, _INTO_MANY, _INTO_MAP)


def _subschemas(
    schema: dict[str, Any], one: tuple[str, ...], many: tuple[str, ...], maps: tuple[str, ...]
) -> Iterator[Any]:
    """The subschemas under `one` (a schema), `many` (a list) and `maps` (a mapping)."""
    for keyword in one:
        if isinstance(schema.get(keyword), dict):
            yield schema[keyword]
    for keyword in many:
        if isinstance(schema.get(keyword), list):
            yield from schema[keyword]
    for keyword in maps:
        if isinstance(schema.get(keyword), dict):
            yield from schema[keyword].values()


def _loop(nodes: dict[int, tuple[Any, Any, list[tuple[int, str]]]]) -> str | None:
    """A loop of in-place applicators and references, said by the reference closing it."""
    done: set[int] = set()
    for start in nodes:
        if start in done:
            continue
        on_path: set[int] = {start}
        stack: list[tuple[int, Iterator[tuple[int, str]]]] = [(start, iter(nodes[start][2]))]
        while stack:
            node, successors = stack[-1]
            step = next(successors, None)
            if step is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
                continue
            target, how = step
            if target in on_path:
                return (
                    f"its references loop without going into the input (through {how}): "
                    "checking any input would never end"
                )
            if target not in done and target in nodes:
                on_path.add(target)
                stack.append((target, iter(nodes[target][2])))
    return None
