"""The model calls of the coordinator's own helpers: counted and limited as a subagent's.

`LLMRewriter` and `LLMSynthesizer` call their model through `call_model` (the one way a
model is called, `agentmesh._engine._model_calls`), in a task engine of the run's scope under the
helper's name, `REWRITER` or `SYNTHESIZER`. So the run's usage limits admit (or refuse)
their calls, the run's retry budget and deadline bound them, a streamed run emits their
events, and what they used reaches the report: `Report.helper_usage`, and a line of
`Report.usage_by_subagent` under the helper's name.
"""

from __future__ import annotations

from typing import Any

from agentmesh._engine._events import TaskEvents
from agentmesh._engine._task import TaskEngine
from agentmesh._engine._usage import UsageTally
from agentmesh._logging import get_logger
from agentmesh.classify import Classifier
from agentmesh.policies import PolicyChain
from agentmesh.retry import RetryPolicy
from agentmesh.scope import RunScope
from agentmesh.task import Task
from agentmesh.usage import UsageSummary

__all__ = ["REWRITER", "SYNTHESIZER", "HelperModels", "helper_context"]

REWRITER = "rewriter"
SYNTHESIZER = "synthesizer"


def helper_context(
    scope: RunScope,
    helper: str,
    *,
    task: Task,
    task_id: str | None,
    retry: RetryPolicy,
    classifier: Classifier,
    deadline: float | None = None,
    log: Any = None,
) -> TaskEngine:
    """A task engine for one call of a coordinator helper in the run of `scope`.

    `task_id` is the task the call is about (a rewrite's), or None for the run itself
    (the synthesis): its events are then the run's own, as other run-level events.
    """
    ctx = TaskEngine(
        task=task,
        subagent=helper,
        scope=scope,
        task_id=task_id or helper,
        retry=retry,
        policies=PolicyChain(),
        classifier=classifier,
        deadline=deadline,
        state={},
        log=log if log is not None else get_logger(run_id=scope.run_id, helper=helper),
    )
    if task_id is None and scope.events is not None:
        ctx.events = TaskEvents(scope.events, None, helper)
    if scope.budget is not None:
        # A subagent's run deposits its first attempt; nothing runs a helper, so here.
        scope.budget.record_first_attempt()
    return ctx


class HelperModels:
    """The helper contexts of one run, and what their model calls used, by helper."""

    __slots__ = ("_tallies", "deadline", "scope")

    def __init__(self, scope: RunScope, deadline: float | None) -> None:
        self.scope = scope
        self.deadline = deadline
        self._tallies: dict[str, list[UsageTally]] = {}

    def context(
        self,
        helper: str,
        *,
        task: Task,
        task_id: str | None,
        retry: RetryPolicy,
        classifier: Classifier,
        log: Any = None,
    ) -> TaskEngine:
        """A context for one helper call, whose usage this run's report will hold."""
        ctx = helper_context(
            self.scope,
            helper,
            task=task,
            task_id=task_id,
            retry=retry,
            classifier=classifier,
            deadline=self.deadline,
            log=log,
        )
        self._tallies.setdefault(helper, []).append(ctx.usage)
        return ctx

    def usage(self) -> dict[str, UsageSummary]:
        """Each helper's model usage in the run; helpers that called no model are left out."""
        by_helper = {helper: _total(tallies) for helper, tallies in self._tallies.items()}
        return {helper: usage for helper, usage in by_helper.items() if usage is not None}


def _total(tallies: list[UsageTally]) -> UsageSummary | None:
    """What the calls of one helper used together; None when none called a model."""
    total = UsageTally()
    for tally in tallies:
        total.merge(tally.summary())
    return total.summary()
