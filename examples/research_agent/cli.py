"""Run a checked command: start or resume a run, research, then write the outputs.

The report goes to stdout (Markdown, or JSON with `--json`) or to `--out FILE`;
progress and the coverage grid go to stderr, so `> report.md` captures the report only.
A report with gaps is a result: exit code 0.

Live progress comes from the run's event stream; `--events FILE` also writes every
event as a JSON line.

Every run checkpoints into `--checkpoints` (a SQLite file): its spec when it starts,
then each search's progress as it goes. The run id is printed first; `--resume RUN_ID`
reruns that run and the searches go on from their checkpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import Callable

from rich.console import Console

from agentmesh import Report, UsageError, configure_logging
from agentmesh.checkpoints import CheckpointError, SQLiteStore
from agentmesh.events import Event
from agentmesh.models import Model, UsageSummary

from .index_cache import IndexCache
from .injection import FaultInjector
from .online import claude, close, plan_with_model
from .openings import OPENINGS, SECONDS_AN_OPENING, Openings
from .options import BadInput, Options, RunSpec, check_faults
from .rendering import RunInfo, searched, to_html, to_json, to_markdown, usage_line
from .research import build_tasks, research
from .resume import load_spec, new_run_id, save_spec
from .sources import SOURCES, Corpus, load_corpus
from .terminal import EventLog, Progress, coverage_grid, note

__all__ = ["run"]


def run(options: Options) -> int:
    """Run the command; raises BadInput for a run that cannot start (exit code 2)."""
    session = _Session(options)
    spec, report, info = asyncio.run(session.research())
    text = to_json(report, info) if options.json else to_markdown(report, info)
    if options.out is not None:
        options.out.write_text(text + "\n", encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    if options.html is not None:
        options.html.write_text(to_html(report, info), encoding="utf-8")
    if not options.quiet:
        topics = [s.title for s in spec.plan.subtopics]
        session.console.print(coverage_grid(report, topics, spec.sources))
        session.say(f"tool calls: {', '.join(f'{s} {n}' for s, n in info.tool_calls.items())}")
        usage = usage_line(report, info)
        if usage is not None:
            session.say(usage)
        written = [str(p) for p in (options.out, options.html) if p is not None]
        where = f"; written to {', '.join(written)}" if written else ""
        session.say(f"done: run {report.run_id}, seed {options.seed}{where}")
    return 0


class _Session:
    """One invocation: its options, its stderr, its checkpoint store."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.console = Console(stderr=True, highlight=False)
        self.started = time.perf_counter()
        self.store = SQLiteStore(options.checkpoints)

    def say(self, message: str) -> None:
        if not self.options.quiet:
            note(self.console, self.started, message)

    async def research(self) -> tuple[RunSpec, Report, RunInfo]:
        """Start the run (or read back the one to resume), then research it."""
        options = self.options
        try:
            spec, run_id = await self._open()
            try:
                model, clients = (
                    (None, ()) if spec.model is None else claude(spec.model, spec.fallback)
                )
            except UsageError as exc:
                raise BadInput(f"--model: {exc}") from None
            planning: UsageSummary | None = None
            try:
                notes: tuple[str, ...] = ()
                if options.resume is None:
                    spec, notes, planning = await self._start(spec, run_id, model)
                else:
                    self.say(
                        f"resuming run {run_id} from {options.checkpoints}: {spec.plan.question}"
                    )
                self.say(f"plan: {' | '.join(s.query for s in spec.plan.subtopics)}")
                calls: Counter[str] = Counter()
                report = await self._search(spec, run_id, model, calls)
            finally:
                await close(clients)
        finally:
            await self.store.close()
        info = RunInfo(
            plan=spec.plan,
            sources=spec.sources,
            mode=spec.mode,
            seed=options.seed,
            faults=tuple(str(f) for f in options.faults),
            notes=notes,
            resumed=options.resume is not None,
            tool_calls={source: calls[source] for source in searched(report, spec.sources)},
            planning_usage=planning,
        )
        return spec, report, info

    async def _open(self) -> tuple[RunSpec, str]:
        """A new run's spec and a new id, or the spec of the run to resume, read back."""
        options, where = self.options, self.options.checkpoints
        if options.resume is None:
            assert options.spec is not None  # parse_options gives one without --resume
            try:
                await self.store.open()  # a file that is not a checkpoint store fails now
            except CheckpointError as exc:
                raise BadInput(f"--checkpoints {where}: {exc}") from None
            return options.spec, new_run_id()
        run_id = options.resume
        try:
            spec = await load_spec(self.store, run_id)
        except CheckpointError as exc:
            raise BadInput(f"--resume {run_id}: {exc}") from None
        if spec is None:
            raise BadInput(f"--resume {run_id}: no run {run_id} in {where}")
        check_faults(options.faults, spec.sources, f"by run {run_id}")
        if spec.model is not None and not os.environ.get("ANTHROPIC_API_KEY"):
            raise BadInput(
                f"--resume {run_id}: the run is online ({spec.model}) and needs ANTHROPIC_API_KEY"
            )
        return spec, run_id

    async def _start(
        self, spec: RunSpec, run_id: str, model: Model | None
    ) -> tuple[RunSpec, tuple[str, ...], UsageSummary | None]:
        """Plan a new run (with Claude when online) and save its spec under its id."""
        notes: tuple[str, ...] = ()
        usage = None
        if model is not None:
            planned, fallback, usage = await plan_with_model(model, spec.plan.question, spec.plan)
            spec = RunSpec(
                plan=planned, sources=spec.sources, model=spec.model, fallback=spec.fallback
            )
            notes = () if fallback is None else (fallback,)
            for line in notes:
                self.say(line)
        try:
            await save_spec(self.store, run_id, spec)
        except CheckpointError as exc:
            raise BadInput(f"--checkpoints {self.options.checkpoints}: {exc}") from None
        self.say(f"run {run_id}: checkpoints in {self.options.checkpoints}")
        self.say(f"resume it with: --resume {run_id}")
        return spec, notes, usage

    async def _search(
        self, spec: RunSpec, run_id: str, model: Model | None, calls: Counter[str]
    ) -> Report:
        """Index the local sources, then research with live progress."""
        corpora: dict[str, Corpus] = {}
        cache = None if self.options.index_cache is None else IndexCache(self.options.index_cache)
        for name in spec.sources:
            if name in SOURCES:
                began = time.perf_counter()
                how = ""
                if cache is None:
                    corpora[name] = load_corpus(name)
                else:
                    loaded = cache.load(name)
                    corpora[name], how = loaded.corpus, f" ({loaded.describe()})"
                elapsed = time.perf_counter() - began
                self.say(f"indexed {name}: {len(corpora[name])} documents in {elapsed:.2f}s{how}")
        # What the documents are about, kept beside the indexes (none with --no-cache).
        saved = None if cache is None else cache.directory.parent / "openings"
        if self.options.verbose:
            configure_logging("INFO")  # asked for: every log line instead of the progress
        else:
            # The example's own warnings (an unreadable cache, no sentence encoder) go
            # to stderr with the framework's: stdout is the report's.
            configure_logging("WARNING")
        openings = Openings.load(corpora, saved)  # after logging is configured
        tasks = build_tasks(spec.plan, list(spec.sources), by_meaning=openings is not None)
        sources = spec.sources
        if openings is not None:
            sources = (*sources, OPENINGS)
            if unread := openings.unencoded():
                self.say(
                    f"reading what {unread} documents are about (once on this machine, "
                    f"~{unread * SECONDS_AN_OPENING:.0f}s on 2 cores)"
                )
        progress = Progress(
            self.console,
            cells={str(t.id): (str(t.topic), str(t.subagent)) for t in tasks},
            topics=[s.title for s in spec.plan.subtopics],
            sources=sources,
            started=self.started,
        )
        listeners: list[Callable[[Event], None]] = []
        if not self.options.verbose and not self.options.quiet:
            listeners.append(progress)
        with contextlib.ExitStack() as stack:
            if self.options.events is not None:
                lines = stack.enter_context(self.options.events.open("w", encoding="utf-8"))
                listeners.append(EventLog(lines))
            if openings is not None:
                stack.callback(openings.save)
                # First, when the run ends early (Ctrl+C): a first run's encoding stops
                # after its batch at hand, and what it encoded is saved.
                stack.callback(openings.stop)
            if progress in listeners:
                progress.start()
                stack.callback(progress.stop)
            return await research(
                spec.plan,
                corpora,
                faults=FaultInjector(self.options.faults, seed=self.options.seed),
                model=model,
                web="web" in spec.sources,
                timeout=self.options.timeout,
                store=self.store,
                run_id=run_id,
                calls=calls,
                listeners=listeners,
                openings=openings,
            )
