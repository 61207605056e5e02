"""The events policies see, the policy base class and the two hook decorators."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, get_args, overload

from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Ruling, Success
from agentmesh.errors import UsageError
from agentmesh.tools import Impact, Tool

if TYPE_CHECKING:
    from agentmesh.scope import RunScope

__all__ = [
    "Match",
    "PostToolUse",
    "PreToolUse",
    "ToolCallEvent",
    "ToolPolicy",
    "ToolResultEvent",
    "post_tool_use",
    "pre_tool_use",
]


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """What a pre-tool-use policy sees: the call about to be made.

    `state` is the user's dict of the run, shared by every call of it (and only that
    run); the framework keeps nothing in it. `scope` is the run's `RunScope`: a stateful
    policy keeps what it learned in `event.scope.memory_for(self)`, one mapping per
    policy name and run.
    """

    tool: str
    arguments: Mapping[str, Any]
    impact: Impact | None
    idempotent: bool
    subagent: str
    run_id: str
    task_id: str
    state: dict[str, Any] = field(repr=False, compare=False)
    scope: RunScope = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ToolResultEvent(ToolCallEvent):
    """What a post-tool-use policy sees: the call and the outcome of one attempt."""

    outcome: Success[Any] | ErrorEnvelope = field(kw_only=True)
    attempt: int = field(kw_only=True)

    @property
    def envelope(self) -> ErrorEnvelope | None:
        return self.outcome if isinstance(self.outcome, ErrorEnvelope) else None


class ToolPolicy:
    """A deterministic rule in the tool path; override `before` and/or `after`.

    Both return a `Ruling` or None (no opinion). Policies are plain, synchronous and
    side-effect free apart from `event.state` and their memory in `event.scope`: they
    must hold 100% of the time, so they do not wait on anything that could fail.
    """

    name: str = "policy"
    # Declares that `before` may return `Ruling.ask`: a Coordinator without a store
    # refuses such a policy when it is built, not when a person could no longer answer.
    asks: bool = False

    def before(self, event: ToolCallEvent) -> Ruling | None:
        return None

    def after(self, event: ToolResultEvent) -> Ruling | None:
        return None


ToolSelector: TypeAlias = str | Tool[Any, Any] | Iterable[str | Tool[Any, Any]] | None
CategorySelector: TypeAlias = ErrorCategory | str | Iterable[ErrorCategory | str] | None


@dataclass(frozen=True, slots=True)
class Match:
    """Which calls a policy applies to: by tool name, impact and (after) error category."""

    tools: frozenset[str] | None = None
    impacts: frozenset[str] | None = None
    categories: frozenset[ErrorCategory] | None = None

    @classmethod
    def of(
        cls,
        tool: ToolSelector = None,
        impact: Impact | Iterable[Impact] | None = None,
        category: CategorySelector = None,
    ) -> Match:
        impacts = _names(impact)
        unknown = sorted(impacts - set(get_args(Impact))) if impacts is not None else []
        if unknown:
            # A typo here would silently exempt every risky tool from the rule.
            raise UsageError(f"impact must be among {get_args(Impact)}; got {unknown}")
        return cls(_tool_names(tool), impacts, _categories(category))

    def call(self, event: ToolCallEvent) -> bool:
        if self.tools is not None and event.tool not in self.tools:
            return False
        return self.impacts is None or event.impact in self.impacts

    def result(self, event: ToolResultEvent) -> bool:
        if not self.call(event):
            return False
        if self.categories is None:
            return True
        envelope = event.envelope
        return envelope is not None and envelope.error_category in self.categories


def _names(value: str | Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset([value] if isinstance(value, str) else value)


def _tool_names(value: ToolSelector) -> frozenset[str] | None:
    """Tool names from names or `Tool` objects (a tool passed itself means its name)."""
    if value is None:
        return None
    items = [value] if isinstance(value, str | Tool) else list(value)
    names = set()
    for item in items:
        if isinstance(item, Tool):
            names.add(item.name)
        elif isinstance(item, str):
            names.add(item)
        else:
            raise UsageError(f"tool= takes tool names or @tool objects, got {item!r}")
    return frozenset(names)


def _categories(value: CategorySelector) -> frozenset[ErrorCategory] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str | ErrorCategory) else list(value)
    try:
        return frozenset(ErrorCategory(item) for item in items)
    except ValueError:
        allowed = ", ".join(c.value for c in ErrorCategory)
        raise UsageError(f"category must be among {allowed}; got {value!r}") from None


PreHook: TypeAlias = Callable[[ToolCallEvent], Ruling | None]
PostHook: TypeAlias = Callable[[ToolResultEvent], Ruling | None]


class PreToolUse(ToolPolicy):
    """A plain function run before matching tool calls."""

    __slots__ = ("asks", "fn", "match", "name")

    def __init__(self, fn: PreHook, match: Match, *, asks: bool = False) -> None:
        _check_sync(fn, "pre_tool_use")
        self.fn = fn
        self.match = match
        self.name = getattr(fn, "__name__", type(fn).__name__)
        self.asks = asks

    def before(self, event: ToolCallEvent) -> Ruling | None:
        return self.fn(event) if self.match.call(event) else None

    def __call__(self, event: ToolCallEvent) -> Ruling | None:
        return self.before(event)


class PostToolUse(ToolPolicy):
    """A plain function run after each attempt of matching tool calls."""

    __slots__ = ("fn", "match", "name")

    def __init__(self, fn: PostHook, match: Match) -> None:
        _check_sync(fn, "post_tool_use")
        self.fn = fn
        self.match = match
        self.name = getattr(fn, "__name__", type(fn).__name__)

    def after(self, event: ToolResultEvent) -> Ruling | None:
        return self.fn(event) if self.match.result(event) else None

    def __call__(self, event: ToolResultEvent) -> Ruling | None:
        return self.after(event)


def _check_sync(fn: Callable[..., Any], decorator: str) -> None:
    if inspect.iscoroutinefunction(fn):
        raise UsageError(
            f"@{decorator}: {getattr(fn, '__qualname__', fn)} is async; policies are plain "
            "functions so that they decide deterministically, without waiting on anything"
        )


@overload
def pre_tool_use(fn: PreHook, /) -> PreToolUse: ...
@overload
def pre_tool_use(
    *,
    tool: ToolSelector = None,
    impact: Impact | Iterable[Impact] | None = None,
    asks: bool = False,
) -> Callable[[PreHook], PreToolUse]: ...
def pre_tool_use(
    fn: PreHook | None = None,
    /,
    *,
    tool: ToolSelector = None,
    impact: Impact | Iterable[Impact] | None = None,
    asks: bool = False,
) -> PreToolUse | Callable[[PreHook], PreToolUse]:
    """Run `fn(event)` before every call of the matching tools; it may deny the call.

    Args:
        tool: a tool name or names; None for every tool.
        impact: only tools declared with this impact ("financial", "legal", "safety").
        asks: `fn` may return `Ruling.ask`: a Coordinator without a store refuses it.
    """
    match = Match.of(tool, impact)
    if fn is not None:
        return PreToolUse(fn, match, asks=asks)
    return lambda f: PreToolUse(f, match, asks=asks)


@overload
def post_tool_use(fn: PostHook, /) -> PostToolUse: ...
@overload
def post_tool_use(
    *,
    tool: ToolSelector = None,
    category: CategorySelector = None,
    impact: Impact | Iterable[Impact] | None = None,
) -> Callable[[PostHook], PostToolUse]: ...
def post_tool_use(
    fn: PostHook | None = None,
    /,
    *,
    tool: ToolSelector = None,
    category: CategorySelector = None,
    impact: Impact | Iterable[Impact] | None = None,
) -> PostToolUse | Callable[[PostHook], PostToolUse]:
    """Run `fn(event)` after each attempt of the matching tools, before anyone sees it.

    Args:
        tool: a tool name or names; None for every tool.
        category: only failures of this error category (or these categories).
        impact: only tools declared with this impact.
    """
    match = Match.of(tool, impact, category)
    if fn is not None:
        return PostToolUse(fn, match)
    return lambda f: PostToolUse(f, match)
