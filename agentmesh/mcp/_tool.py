"""`MCPTool`: one tool of an MCP server, an agentmesh `Tool` in every respect.

`ctx.call` treats it like any `@tool`: policies, the retry loop, the budget, the breaker,
rate limits, the ledger, tracing and masking all apply. What differs is underneath:
the input is checked against the server's JSON schema (not a Python signature), and the
body is a `tools/call` on the server's shared connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, Unpack, cast

import pydantic_core

from agentmesh._engine._task import engine_of
from agentmesh._logging import get_logger
from agentmesh._numbers import number
from agentmesh._tool_options import TOOL_KEYWORDS, MCPToolKwargs, ToolKwargs, check_keywords
from agentmesh.envelope import ErrorEnvelope
from agentmesh.errors import AgentError, CallFailed, InvalidInput, UsageError
from agentmesh.mcp._errors import remote_outcome, tool_error
from agentmesh.mcp._schema import (
    CHECK_SECONDS,
    CheckedSchema,
    SchemaTooCostly,
    check_arguments,
    check_arguments_off_loop,
)
from agentmesh.tools import Tool

# jsonschema ships no type information (a dependency of the mcp SDK).
Validator = Any

if TYPE_CHECKING:
    import mcp.types

    from agentmesh.breaker import CircuitBreaker

__all__ = ["MCPTool", "idempotent_from"]

_OPTIONS = frozenset(MCPToolKwargs.__annotations__)


class ToolServer(Protocol):
    """What a tool needs of its server (an `MCPServer`): its name, breaker, listing, calls."""

    @property
    def name(self) -> str: ...
    @property
    def breaker(self) -> CircuitBreaker | None: ...
    @property
    def required(self) -> bool: ...
    @property
    def tool_names(self) -> frozenset[str]: ...
    async def describe(self, name: str) -> mcp.types.Tool | None: ...
    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, request_timeout: float | None = None
    ) -> mcp.types.CallToolResult: ...


async def _remote(ctx: Any = None) -> Any:
    """Stands in for the body: an MCP tool's parameters come from its schema."""


class MCPTool(Tool[..., Any]):
    """A tool of an `MCPServer`; made by `server.tool(name)` or `server.list_tools()`.

    Made before the server is connected, it learns its schema, description and
    annotations at its first call (still before the server is asked to run it).

    Args:
        server: the server that runs it.
        name: the tool's name on the server.
        idempotent: None follows the server's annotations (`readOnlyHint` or
            `idempotentHint` -> True, `destructiveHint` -> False, none -> False).
        impact: "financial", "legal" or "safety", for policies.
        timeout: seconds one call may wait for its answer (default: the server's).
        retry, rate_limit, max_concurrency: as for `@tool`.
    """

    def __init__(self, server: ToolServer, name: str, **options: Unpack[MCPToolKwargs]) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError(f"MCPServer.tool(name=) takes the tool's name, got {name!r}")
        check_keywords(f"MCPServer.tool({name!r})", options, _OPTIONS)
        idempotent = options.get("idempotent")
        if idempotent is not None and not isinstance(idempotent, bool):
            raise UsageError(
                f"MCPServer.tool(idempotent=) takes True, False or None, got {idempotent!r}"
            )
        timeout = options.get("timeout")
        # The limits pass on as given; name, description and breaker are the server's.
        shared = {key: value for key, value in options.items() if key in TOOL_KEYWORDS}
        described = {
            "name": name,
            "description": name,
            "idempotent": bool(idempotent),
            "breaker": server.breaker,
        }
        super().__init__(_remote, **cast(ToolKwargs, shared | described))
        if timeout is not None:
            timeout = number("MCPServer.tool(timeout=)", timeout, above=True, unit="seconds")
        self.server = server
        self.timeout = timeout
        self._idempotent_override = idempotent
        self._spec: mcp.types.Tool | None = None
        self._validator: Validator | None = None
        self._schema_problem: str | None = None

    @property
    def required(self) -> bool:
        """As a source of an `LLMSubagent`'s tools, whether its server is required."""
        return self.server.required

    @property
    def known(self) -> bool:
        """Whether the server's description of the tool has been read."""
        return self._spec is not None

    @property
    def schema_problem(self) -> str | None:
        """Why the server's input schema cannot be used (not valid JSON Schema, a `$ref`
        that does not resolve or loops forever), or None."""
        return self._schema_problem

    def learn(self, spec: mcp.types.Tool) -> None:
        """Take the schema, description and annotations the server lists for the tool."""
        if self._spec is spec:
            return
        self._spec = spec
        self.description = spec.description or spec.title or spec.name
        if self._idempotent_override is None:
            self.idempotent = idempotent_from(spec.annotations)
        checked = CheckedSchema.of(spec.input_schema)
        self._validator, self._schema_problem = checked.validator, checked.problem
        if checked.unchecked_patterns:
            get_logger(mcp_server=self.server.name, tool=self.name).warning(
                "mcp_patterns_left_to_server",
                patterns=list(checked.unchecked_patterns),
                reason="look-around or back-references: no linear-time engine runs them",
            )

    @property
    def input_schema(self) -> dict[str, Any]:
        """The server's JSON schema of the input; `{"type": "object"}` until it is known."""
        return dict(self._spec.input_schema) if self._spec is not None else {"type": "object"}

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        if args:
            raise TypeError(f"{self.name} is an MCP tool: pass its arguments by name")
        return dict(kwargs)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check `arguments` against the server's schema; pydantic's error names the field.

        Before the schema is known the check happens at the first attempt (`invoke`).
        The check gives up after `CHECK_SECONDS` (refused, saying so): the schema is
        the server's, and may be built to be costly.
        """
        arguments = dict(arguments)
        if self._validator is not None:
            try:
                errors = check_arguments(self._validator, arguments)
            except (SchemaTooCostly, RecursionError) as exc:
                raise self._uncheckable(exc) from None
            _refuse(self.name, errors)
        return arguments

    async def avalidate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """`validate` in a worker thread: no schema can hold up the event loop."""
        arguments = dict(arguments)
        if self._validator is not None:
            try:
                errors = await check_arguments_off_loop(self._validator, arguments)
            except (SchemaTooCostly, RecursionError) as exc:
                raise self._uncheckable(exc) from None
            _refuse(self.name, errors)
        return arguments

    def _uncheckable(self, exc: BaseException) -> pydantic_core.ValidationError:
        server = self.server.name
        if isinstance(exc, SchemaTooCostly):
            reason = (
                f"the arguments could not be checked against {server}'s input schema of "
                f"{self.name} within {CHECK_SECONDS} s (the schema is too costly to "
                f"evaluate); {server} was not called"
            )
        else:
            reason = (
                f"the arguments are nested too deeply to be checked against {server}'s "
                f"input schema of {self.name}; {server} was not called"
            )
        return pydantic_core.ValidationError.from_exception_data(
            f"{self.name} input",
            [
                {
                    "type": pydantic_core.PydanticCustomError(
                        "uncheckable", "{reason}", {"reason": reason}
                    ),
                    "loc": (),
                    "input": None,
                }
            ],
        )

    async def invoke(
        self, arguments: Mapping[str, Any], *, idempotency_key: str | None, ctx: Any = None
    ) -> Any:
        """`tools/call` on the server; a result with `isError` raises, never returns."""
        if not self.known:
            await self._learn_now(arguments)
        if self._schema_problem is not None:
            raise AgentError(
                f"{self.server.name} lists {self.name} with an input schema that cannot "
                f"be used: {self._schema_problem}",
                error_type="invalid_schema",
                details="the server was not called",
            )
        result = await self.server.call_tool(
            self.name, dict(arguments), request_timeout=self.timeout
        )
        remote = remote_outcome(result, agentmesh=self._from_agentmesh(result))
        if remote is not None:
            if ctx is not None:
                # As `subagent.as_tool()` does: the served run's rulings and retries count.
                engine_of(ctx).adopt(remote)
            if isinstance(remote, ErrorEnvelope):
                raise CallFailed(remote)  # final: it was retried where it happened
            return remote.data
        if result.is_error:
            raise tool_error(self.name, result)
        return _data(result)

    def _from_agentmesh(self, result: mcp.types.CallToolResult) -> bool:
        """Whether an agentmesh server (`serve`) answered: by the tool's listing or the result."""
        from agentmesh.mcp._serve_result import OUTCOME_MARK, RUN_ID_META

        declared = self._spec.output_schema if self._spec is not None else None
        return bool(declared and OUTCOME_MARK in declared) or RUN_ID_META in (result.meta or {})

    async def list_tools(self) -> list[Tool[..., Any]]:
        """Itself, its schema known: as a `ToolSource`, an `LLMSubagent` offers it so."""
        if not self.known:
            await self._describe()
        return [self]

    async def _describe(self) -> None:
        spec = await self.server.describe(self.name)
        if spec is None:
            raise InvalidInput(
                f"{self.server.name} has no tool named {self.name!r}",
                error_type="unknown_tool",
                details=f"tools of {self.server.name}: {sorted(self.server.tool_names)}",
            )
        self.learn(spec)

    async def _learn_now(self, arguments: Mapping[str, Any]) -> None:
        await self._describe()
        if self._validator is not None:
            try:
                await self.avalidate(arguments)
            except pydantic_core.ValidationError as exc:
                # Not retried: the input will not become valid by trying again.
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
                )
                raise InvalidInput(
                    f"invalid input: {problems}",
                    error_type="invalid_input",
                    field=".".join(map(str, exc.errors()[0]["loc"])) or None,
                ) from None

    def __repr__(self) -> str:
        flags = "idempotent" if self.idempotent else "not idempotent"
        return f"<MCPTool {self.name} of {self.server.name} ({flags})>"


def idempotent_from(annotations: mcp.types.ToolAnnotations | None) -> bool:
    """What the MCP annotations say: read-only or idempotent, unless destructive."""
    if annotations is None:
        return False
    if annotations.read_only_hint:
        return True
    if annotations.destructive_hint:
        return False
    return bool(annotations.idempotent_hint)


def _refuse(tool: str, found: list[Any]) -> None:
    """Raise pydantic's ValidationError naming each field the schema refuses, if any."""
    errors: list[pydantic_core.InitErrorDetails] = []
    for error in found:
        path = tuple(error.absolute_path)
        if error.validator == "required":
            present = error.instance if isinstance(error.instance, dict) else {}
            for missing in error.validator_value:
                if missing not in present:
                    errors.append({"type": "missing", "loc": (*path, missing), "input": present})
            continue
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            for extra in error.instance:
                if extra not in allowed:
                    loc = (*path, extra)
                    errors.append({"type": "extra_forbidden", "loc": loc, "input": None})
            continue
        errors.append(
            {
                # The message is data, not a template: braces in it must not be formatted.
                "type": pydantic_core.PydanticCustomError(
                    "json_schema", "{reason}", {"reason": error.message}
                ),
                "loc": path,
                "input": error.instance,
            }
        )
    if errors:
        raise pydantic_core.ValidationError.from_exception_data(f"{tool} input", errors)


def _data(result: mcp.types.CallToolResult) -> Any:
    """A result's data: its structured content, else its text, else its content blocks."""
    if result.structured_content is not None:
        return result.structured_content
    blocks = result.content
    if not blocks:
        return None
    if all(block.type == "text" for block in blocks):
        texts = [block.text for block in blocks if block.type == "text"]
        return texts[0] if len(texts) == 1 else texts
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]
