"""The subagent options: one checked value, the same from every way of making a subagent."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from agentmesh import CircuitBreaker, Context, RetryPolicy, Subagent, Task, UsageError, subagent
from agentmesh.classify import Classifier
from agentmesh.models import ScriptedModel
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.subagents import LLMSubagent, SubagentOptions
from agentmesh.subagents._options import SubagentKwargs


class _Handler(Subagent):
    async def handle(self, task: Task, ctx: Context) -> Any:
        return task.query


async def _body(task: Task, ctx: Context) -> Any:
    return task.query


def _subclass(name: str, **options: Any) -> Subagent:
    return _Handler(name, **options)


def _decorated(name: str, **options: Any) -> Subagent:
    return subagent(name=name, **options)(_body)


def _llm(name: str, **options: Any) -> Subagent:
    return LLMSubagent(name, ScriptedModel([]), **options)


MAKERS: list[Callable[..., Subagent]] = [_subclass, _decorated, _llm]


@pre_tool_use
def _allow(event: ToolCallEvent) -> Ruling:
    return Ruling.allow()


class TestSubagentOptions:
    @pytest.mark.parametrize("make", MAKERS)
    def test_every_constructor_keeps_the_same_options(self, make: Callable[..., Subagent]) -> None:
        """A subclass, `@subagent` and `LLMSubagent` turn the same keywords into equal options."""
        retry = RetryPolicy(max_attempts=2)
        breaker = CircuitBreaker()
        classifier = Classifier()
        made = make(
            "web",
            retry=retry,
            alternatives=["archive"],
            policies=[_allow],
            rate_limit=(3, 1),
            max_concurrency=2,
            classifier=classifier,
            checkpoint=True,
            breaker=breaker,
        )
        assert made.options == SubagentOptions(
            retry=retry,
            alternatives=("archive",),
            policies=(_allow,),
            rate_limit=(3, 1),
            max_concurrency=2,
            classifier=classifier,
            checkpoint=True,
            breaker=breaker,
        )
        assert (made.retry, made.alternatives, made.checkpoint) == (retry, ("archive",), True)
        assert made.limiter.max_concurrency == 2
        assert breaker.name == "web"  # an unnamed breaker takes its subagent's name

    @pytest.mark.parametrize("make", MAKERS)
    def test_defaults_are_the_options_defaults(self, make: Callable[..., Subagent]) -> None:
        """Without keywords a subagent has the default options (default retry and classifier)."""
        made = make("web")
        assert made.options == SubagentOptions()
        assert made.limiter.is_unlimited

    @pytest.mark.parametrize("make", MAKERS)
    @pytest.mark.parametrize(
        ("options", "named"),
        [
            ({"retry": 3}, "retry="),
            ({"alternatives": "archive"}, "alternatives"),
            ({"policies": [print]}, "is not a policy"),
            ({"breaker": "open"}, "breaker="),
            ({"rate_limit": (0, 1)}, "rate_limit="),
            ({"max_concurrency": 0}, "max_concurrency="),
            ({"retires": RetryPolicy()}, "'retires'"),
        ],
    )
    def test_misuse_names_the_argument(
        self, make: Callable[..., Subagent], options: dict[str, Any], named: str
    ) -> None:
        """A wrong or unknown option raises UsageError naming it, whichever constructor."""
        with pytest.raises(UsageError, match=named):
            make("web", **options)

    def test_keywords_and_fields_are_the_same_set(self) -> None:
        """Each option is a keyword of every constructor and a field of the value, no more."""
        fields = {field.name for field in dataclasses.fields(SubagentOptions)}
        assert set(SubagentKwargs.__annotations__) == fields

    def test_options_are_frozen(self) -> None:
        """The checked options cannot change under a subagent that already uses them."""
        with pytest.raises(dataclasses.FrozenInstanceError):
            _subclass("web").options.checkpoint = True  # type: ignore[misc]  # the point
