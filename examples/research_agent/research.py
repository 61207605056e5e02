"""One research run: plan -> one search subagent per (subtopic x source) -> report.

This is the part to copy: build the subagents, hand the coordinator one task per
subtopic and source, and let it route every outcome. Nothing here catches a failure:
the framework turns each into a decision and a coverage entry. With a checkpoint
store, the coordinator's subagents save their progress under the run id, and running
the same tasks with the same run id again continues from it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from agentmesh import Coordinator, Report, Subagent, Task
from agentmesh.checkpoints import CheckpointStore
from agentmesh.coordinator import LLMRewriter, LLMSynthesizer, Rewriter, Synthesizer
from agentmesh.events import Event
from agentmesh.models import Model
from agentmesh.policies import PreToolUse, ToolCallEvent, pre_tool_use

from . import meaning
from .agents import (
    CALL_TIMEOUT,
    offline_analysis,
    openings_agent,
    plain_words,
    search_agent,
)
from .injection import FaultInjector
from .online import MODEL_RETRY, model_analysis, web_agent
from .openings import OPENINGS, Openings
from .planner import Plan
from .relevance import Scorer
from .sources import Corpus
from .synthesis import ExtractiveSynthesizer

__all__ = ["build_tasks", "count_calls", "research"]


def build_tasks(plan: Plan, sources: list[str], *, by_meaning: bool = False) -> list[Task]:
    """One task per (subtopic, source); the id names both, for logs and progress. With
    `by_meaning`, one more: the route by meaning's (`OPENINGS`), for the whole question
    as asked (the encoder reads sentences, not word lists), under the first subtopic."""
    tasks = [
        Task(
            id=f"{number}-{source}",
            query=subtopic.query,
            topic=subtopic.title,
            subagent=source,
        )
        for number, subtopic in enumerate(plan.subtopics, start=1)
        for source in sources
    ]
    if by_meaning:
        whole = plan.subtopics[0]
        tasks.append(
            Task(id=f"1-{OPENINGS}", query=plan.question, topic=whole.title, subagent=OPENINGS)
        )
    return tasks


def count_calls(counts: Counter[str]) -> PreToolUse:
    """A policy that allows every tool call and counts it under its subagent (source).

    What a run really searched: a resumed run does not repeat what it restored.
    """

    @pre_tool_use
    def count_call(event: ToolCallEvent) -> None:
        counts[event.subagent] += 1

    return count_call


async def research(
    plan: Plan,
    corpora: Mapping[str, Corpus],
    *,
    faults: FaultInjector,
    model: Model | None = None,
    web: bool = True,
    timeout: float = 30.0,  # noqa: ASYNC109  # the run's, passed to the Coordinator
    call_timeout: float = CALL_TIMEOUT,
    store: CheckpointStore | None = None,
    run_id: str | None = None,
    calls: Counter[str] | None = None,
    listeners: Sequence[Callable[[Event], None]] = (),
    openings: Openings | None = None,
) -> Report:
    """Search every source for every subtopic, concurrently, and report what was found.

    Offline (no `model`): deterministic analysis, rewriter and synthesis. With a model:
    Claude selects the passages, rewrites rejected queries and writes the summary, and
    the `web` source joins the local ones (unless `web` is false). With a `store`, a
    run id that has checkpoints resumes: the searches continue where they stopped.
    `call_timeout` bounds each search call (`agents.CALL_TIMEOUT`). `calls` counts each
    source's tool calls; each of `listeners` sees every event of
    the run as it happens (the live progress, the `--events` file). With `openings`
    (`openings.Openings.load`), the findings rank by what their documents are about too,
    and one more task searches every source by meaning (`agents.openings_agent`): on a
    machine's first run, every document's opening is encoded first (`Openings.prepare`).
    """
    # One yardstick for every passage of every source: findings rank across tasks.
    scorer = Scorer.of(corpora.values(), meaning.shipped())
    analyse = offline_analysis(scorer) if model is None else model_analysis(model)
    subagents: list[Subagent] = [
        search_agent(corpus, faults, analyse=analyse, call_timeout=call_timeout)
        for corpus in corpora.values()
    ]
    if openings is not None:
        # Every document's opening, for the route by meaning: encoded on a machine's
        # first run (~40 s), read back by the next; in a thread, off the event loop.
        await asyncio.to_thread(openings.prepare)
        subagents.append(openings_agent(openings, corpora, faults, call_timeout=call_timeout))
    rewriter: Rewriter = plain_words
    synthesizer: Synthesizer = ExtractiveSynthesizer(scorer, plan.question, openings=openings)
    if model is not None:
        if web:
            subagents.append(web_agent(model, faults))
        rewriter = LLMRewriter(model, retry=MODEL_RETRY)
        synthesizer = LLMSynthesizer(model, fallback=synthesizer, retry=MODEL_RETRY)
    coordinator = Coordinator(
        subagents,
        rewriter=rewriter,
        synthesizer=synthesizer,
        timeout=timeout,
        store=store,
        policies=[] if calls is None else [count_calls(calls)],
    )
    sources = [sub.name for sub in subagents if sub.name != OPENINGS]
    # The task ids name the subtopic and source: the same in every run of this plan,
    # so a resumed run finds each task's checkpoints.
    tasks = build_tasks(plan, sources, by_meaning=openings is not None)
    if not listeners:
        return await coordinator.run(tasks, run_id=run_id)
    async with coordinator.stream(tasks, run_id=run_id) as events:
        async for event in events:
            for listener in listeners:
                listener(event)
    assert events.report is not None  # the stream ran to its RunFinished event
    return events.report
