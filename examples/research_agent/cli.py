"""Run a checked command: index the sources, research, then write the outputs.

The report goes to stdout (Markdown, or JSON with `--json`) or to `--out FILE`;
progress and the coverage grid go to stderr, so `> report.md` captures the report only.
A report with gaps is a result: exit code 0.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

from rich.console import Console

from agentmesh import Report, configure_logging
from agentmesh.models import AnthropicModel

from .injection import FaultInjector
from .online import plan_with_model
from .options import Options
from .planner import Plan
from .rendering import RunInfo, to_html, to_json, to_markdown
from .research import build_tasks, research
from .sources import SOURCES, Corpus, load_corpus
from .terminal import Progress, coverage_grid, note

__all__ = ["run"]


def run(options: Options) -> int:
    started = time.perf_counter()
    console = Console(stderr=True, highlight=False)

    def say(message: str) -> None:
        if not options.quiet:
            note(console, started, message)

    corpora: dict[str, Corpus] = {}
    for name in options.sources:
        if name in SOURCES:
            began = time.perf_counter()
            corpora[name] = load_corpus(name)
            elapsed = time.perf_counter() - began
            say(f"indexed {name}: {len(corpora[name])} documents in {elapsed:.2f}s")
    the_plan, report, notes = asyncio.run(_research(options, corpora, console, started, say))

    info = RunInfo(
        plan=the_plan,
        sources=options.sources,
        mode=options.mode,
        seed=options.seed,
        faults=tuple(str(f) for f in options.faults),
        notes=notes,
    )
    text = to_json(report, info) if options.json else to_markdown(report, info)
    if options.out is not None:
        options.out.write_text(text + "\n", encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    if options.html is not None:
        options.html.write_text(to_html(report, info), encoding="utf-8")
    if not options.quiet:
        topics = [s.title for s in the_plan.subtopics]
        console.print(coverage_grid(report, topics, options.sources))
        written = [str(p) for p in (options.out, options.html) if p is not None]
        where = f"; written to {', '.join(written)}" if written else ""
        say(f"done: run {report.run_id}, seed {options.seed}{where}")
    return 0


async def _research(
    options: Options,
    corpora: dict[str, Corpus],
    console: Console,
    started: float,
    say: Callable[[str], None],
) -> tuple[Plan, Report, tuple[str, ...]]:
    """Plan (with Claude when online), then research with live progress."""
    the_plan, notes = options.plan, tuple[str, ...]()
    model = None if options.model is None else AnthropicModel(options.model)
    try:
        if model is not None:
            the_plan, fallback = await plan_with_model(model, the_plan.question, the_plan)
            if fallback is not None:
                notes = (fallback,)
                say(fallback)
        say(f"plan: {' | '.join(s.query for s in the_plan.subtopics)}")
        tasks = build_tasks(the_plan, list(options.sources))
        progress = Progress(
            console,
            cells={str(t.id): (str(t.topic), str(t.subagent)) for t in tasks},
            topics=[s.title for s in the_plan.subtopics],
            sources=options.sources,
            started=started,
        )
        if options.verbose:
            configure_logging("INFO")
        elif not options.quiet:
            progress.install()
        try:
            report = await research(
                the_plan,
                corpora,
                faults=FaultInjector(options.faults, seed=options.seed),
                model=model,
                web="web" in options.sources,
                deadline=options.deadline,
            )
        finally:
            progress.stop()
    finally:
        if model is not None:
            await model.aclose()
    return the_plan, report, notes
