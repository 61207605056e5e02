"""`OneEach`: a run's jobs when every task goes to one subagent, made when they are read.

A plan of 10,000 tasks held as 10,000 `(task_id, task, subagent)` tuples keeps 10,000
objects alive for the whole run, each one walked again by the garbage collector's older
passes. Two lists hold the same plan; a job's tuple exists only while it is used.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = ["OneEach"]

Job = tuple[str, Task, Subagent]


class OneEach(Sequence[Job]):
    """The jobs `(task_id, task, subagent)` of tasks that each go to one subagent.

    A task's id is its own `id`, or `task-<index>` (its place in the plan), as the
    coordinator names it.
    """

    __slots__ = ("_subagents", "_tasks")

    def __init__(self, tasks: list[Task], subagents: list[Subagent]) -> None:
        if len(tasks) != len(subagents):
            raise ValueError("one subagent per task")
        self._tasks = tasks
        self._subagents = subagents

    def __len__(self) -> int:
        return len(self._tasks)

    @overload
    def __getitem__(self, index: int) -> Job: ...
    @overload
    def __getitem__(self, index: slice) -> list[Job]: ...
    def __getitem__(self, index: int | slice) -> Job | list[Job]:
        if isinstance(index, slice):
            return [self._job(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("job index out of range")
        return self._job(index)

    def __iter__(self) -> Iterator[Job]:
        for index, (task, subagent) in enumerate(zip(self._tasks, self._subagents, strict=True)):
            yield (task.id or f"task-{index}", task, subagent)

    def _job(self, index: int) -> Job:
        task = self._tasks[index]
        return (task.id or f"task-{index}", task, self._subagents[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list of its jobs, unhashable like one

    def __repr__(self) -> str:
        return f"<OneEach {len(self)} jobs>"
