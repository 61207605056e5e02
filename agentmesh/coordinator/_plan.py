"""Planning: `plan()` pairs each task with its subagent(s), before anything runs.

`OneEach` is a run's jobs when every task goes to one subagent, made when they are read.

A plan of 10,000 tasks held as 10,000 `(task_id, task, subagent)` tuples keeps 10,000
objects alive for the whole run, each one walked again by the garbage collector's older
passes. Two lists hold the same plan; a job's tuple exists only while it is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from operator import is_not
from typing import cast, overload

from agentmesh.errors import UsageError
from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = ["Job", "OneEach", "plan"]

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


def plan(tasks: object, subagents: Mapping[str, Subagent]) -> Sequence[Job]:
    """Pair each task with its subagent(s); bad names fail before anything runs.

    `tasks` is a Task, a query string, or an iterable of them. A task that names no
    subagent goes to the only one, or fans out to all of them (ids `<task>/<subagent>`).
    When every task goes to one subagent, the plan is two lists (`OneEach`), not a
    tuple per job kept for the whole run.
    """
    planned: list[Task] = []
    targets: list[Subagent | None] = []  # None: the task fans out to every subagent
    only = next(iter(subagents.values())) if len(subagents) == 1 else None
    for index, task in enumerate(_each_task(tasks)):
        if not isinstance(task, Task):  # a Task, most often: one test for it
            if not isinstance(task, str):
                raise UsageError(f"Coordinator.run() takes Tasks or query strings, got {task!r}")
            task = Task(query=task)
        if task.subagent is not None and task.subagent not in subagents:
            raise UsageError(
                f"task {task.id or f'task-{index}'} names subagent {task.subagent!r}; "
                f"known: {sorted(subagents)}"
            )
        planned.append(task)
        targets.append(only if task.subagent is None else subagents[task.subagent])
    # The targets that are not None, picked in C: no bytecode per task.
    chosen = cast("list[Subagent]", list(compress(targets, map(is_not, targets, repeat(None)))))
    if len(chosen) == len(planned):
        return OneEach(planned, chosen)
    jobs: list[Job] = []
    for index, (task, target) in enumerate(zip(planned, targets, strict=True)):
        base = task.id or f"task-{index}"
        if target is not None:
            jobs.append((base, task, target))
        else:
            jobs += [(f"{base}/{name}", task, sub) for name, sub in subagents.items()]
    return jobs


def _each_task(tasks: object) -> Iterable[object]:
    """`tasks` as an iterable; a lone Task or query string is one task, never split."""
    if isinstance(tasks, Task | str):
        return (tasks,)
    # Iterable, but never meant as tasks: bytes give ints, a mapping its keys.
    if isinstance(tasks, bytes | bytearray | memoryview | Mapping) or not isinstance(
        tasks, Iterable
    ):
        raise UsageError(
            "Coordinator.run(tasks=) takes a Task, a query string, or an iterable of them "
            f"(a list, a generator), got a {type(tasks).__name__}"
        )
    return tasks
