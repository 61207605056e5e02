"""`@subagent`: a subagent from a plain `async def f(task, ctx)`."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Unpack, overload

from agentmesh._signatures import spell_out
from agentmesh.context import Context
from agentmesh.errors import UsageError
from agentmesh.subagents._base import Subagent
from agentmesh.subagents._options import SubagentKwargs, SubagentOptions
from agentmesh.task import Task

__all__ = ["FunctionSubagent", "subagent"]

SubagentFn = Callable[[Task, Context], Awaitable[Any]]


class FunctionSubagent(Subagent):
    """A `Subagent` whose `handle` is a function."""

    def __init__(
        self, fn: SubagentFn, name: str | None = None, **options: Unpack[SubagentKwargs]
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise UsageError(
                f"@subagent needs an async function `async def f(task, ctx)`; "
                f"{getattr(fn, '__qualname__', fn)!r} is not async"
            )
        params = list(inspect.signature(fn).parameters.values())
        if len(params) != 2:
            raise UsageError(
                f"@subagent function {fn.__qualname__} must take (task, ctx); it takes "
                f"({', '.join(p.name for p in params)})"
            )
        self.fn = fn
        super().__init__(name or fn.__name__, **options)
        self.__doc__ = fn.__doc__
        self.description = self.description or inspect.getdoc(fn) or ""

    def handle(self, task: Task, ctx: Context) -> Coroutine[Any, Any, Any]:
        # The function's own coroutine, not one that awaits it: a coroutine and a frame
        # fewer per attempt in flight (`fn` was checked to be a coroutine function).
        return self.fn(task, ctx)


@overload
def subagent(fn: SubagentFn, /) -> FunctionSubagent: ...
@overload
def subagent(
    *, name: str | None = None, **options: Unpack[SubagentKwargs]
) -> Callable[[SubagentFn], FunctionSubagent]: ...
def subagent(
    fn: SubagentFn | None = None,
    /,
    *,
    name: str | None = None,
    **options: Unpack[SubagentKwargs],
) -> FunctionSubagent | Callable[[SubagentFn], FunctionSubagent]:
    """Turn `async def f(task, ctx)` into a `Subagent`; see `Subagent` for the options."""

    def make(func: SubagentFn) -> FunctionSubagent:
        return FunctionSubagent(func, name, **options)

    return make if fn is None else make(fn)


spell_out(FunctionSubagent.__init__, SubagentKwargs, SubagentOptions)
spell_out(subagent, SubagentKwargs, SubagentOptions)
