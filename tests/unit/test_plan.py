"""A coordinator's plan: every task paired with its subagent(s), ids as the report names them."""

from __future__ import annotations

import pytest

from agentmesh import Context, Coordinator, Task, subagent
from agentmesh.coordinator._plan import OneEach
from agentmesh.coordinator._plan import plan as plan_of


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> str:
    return task.query


@subagent(name="web")
async def web(task: Task, ctx: Context) -> str:
    return task.query


class TestPlan:
    def test_tasks_for_one_subagent_each_are_planned_as_two_lists(self) -> None:
        """The jobs read back as the tuples they stand for, ids from the task or its index."""
        plan = plan_of(["a", Task(query="b", id="mine")], {"docs": docs})
        assert isinstance(plan, OneEach)
        assert list(plan) == [
            ("task-0", Task(query="a"), docs),
            ("mine", Task(query="b", id="mine"), docs),
        ]
        assert plan[1] == plan[-1] == ("mine", Task(query="b", id="mine"), docs)
        assert plan[:1] == [("task-0", Task(query="a"), docs)]
        assert len(plan) == 2
        assert plan == list(plan)
        with pytest.raises(IndexError):
            plan[2]

    def test_tasks_naming_their_subagent_are_planned_as_two_lists_too(self) -> None:
        """With several subagents, tasks that each name one still need no tuple per job."""
        plan = plan_of(
            [Task(query="a", subagent="web"), Task(query="b", subagent="docs")],
            {"docs": docs, "web": web},
        )
        assert isinstance(plan, OneEach)
        assert [(task_id, sub.name) for task_id, _, sub in plan] == [
            ("task-0", "web"),
            ("task-1", "docs"),
        ]

    def test_a_task_for_every_subagent_fans_out(self) -> None:
        """A task that names none goes to each subagent, ids `<task>/<subagent>`."""
        plan = plan_of(["a", Task(query="b", subagent="web")], {"docs": docs, "web": web})
        assert [(task_id, task.query, sub.name) for task_id, task, sub in plan] == [
            ("task-0/docs", "a", "docs"),
            ("task-0/web", "a", "web"),
            ("task-1", "b", "web"),
        ]

    async def test_a_run_reports_the_planned_ids(self) -> None:
        """The report's records carry the ids of the plan, in its order."""
        report = await Coordinator([docs]).run(["a", Task(query="b", id="mine"), "c"])
        assert [record.task_id for record in report.records] == ["task-0", "mine", "task-2"]
