"""One search subagent per source: two tools, local retries, honest partial progress.

The subagent searches like a person with a card catalogue: it ranks the source's
documents (`find_<source>`), then reads the best ones one by one (`read_<source>`),
recording each document's passages with `ctx.record_partial` as it goes. A failure
that local retries cannot fix ends the task with that progress attached, so the
report keeps what was read before it (status `partial`). Finally the offline analysis
keeps the relevant passages; an empty list is an answer ("searched, nothing found").

The subagent is declared with `checkpoint=True`: run with a checkpoint store, its
progress is saved as it is recorded, and a rerun of the same run and task (a later
attempt, or `--resume`) starts with it, so documents already read are not read again.

With the sentence encoder, one more subagent searches every source the same way, by
meaning instead of words (`openings_agent`, the route by meaning): it ranks the
documents by their openings' closeness to the whole question and keeps what it reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeAlias, TypeVar

from agentmesh import (
    AgentError,
    Context,
    ErrorEnvelope,
    InvalidInput,
    RetryPolicy,
    Subagent,
    Task,
    Tool,
    subagent,
    tool,
)

from .analysis import relevant
from .injection import FaultInjector
from .openings import NEAREST, OPENINGS, Openings, OpeningsUnavailable
from .ranking import Query, QuerySyntaxError, parse_query
from .relevance import Scorer
from .sources import Corpus, Passage

__all__ = [
    "CALL_TIMEOUT",
    "RETRY",
    "Analyse",
    "answer_within",
    "offline_analysis",
    "openings_agent",
    "plain_words",
    "search_agent",
]

# A source that has not answered a search call in this time is stuck: give up on the
# attempt. Its own time: not the time the call waited for a busy loop (`answer_within`).
CALL_TIMEOUT = 0.2
# Small real delays: a transient fault is retried within a fraction of a second.
RETRY = RetryPolicy(max_attempts=5, initial_delay=0.05, max_delay=0.4)

T = TypeVar("T")

Analyse: TypeAlias = Callable[[Context, str, Sequence[Passage]], Awaitable[list[Passage]]]
"""`analyse(ctx, query, passages)`: the relevant passages, best first."""


def offline_analysis(scorer: Scorer, *, keep: int = 4) -> Analyse:
    """The deterministic analysis (see `analysis.relevant`)."""

    async def analyse(ctx: Context, query: str, passages: Sequence[Passage]) -> list[Passage]:
        return relevant(scorer, query, passages, keep=keep)

    return analyse


def search_agent(
    corpus: Corpus,
    faults: FaultInjector,
    *,
    analyse: Analyse,
    documents: int = 6,
    passages: int = 3,
    call_timeout: float = CALL_TIMEOUT,
) -> Subagent:
    """The subagent that searches `corpus`, named after it; a search call whose source
    has not answered `call_timeout` seconds after it was asked is given up (and retried)."""
    source = corpus.name

    @tool(name=f"find_{source}", idempotent=True)
    async def find(query: str, limit: int = documents) -> list[str]:
        """Rank the source's documents for `query`; quoted words must appear."""
        parsed = _parse(query)
        empty = await _struck(faults, source, f"find {query}", call_timeout, parsed)
        return [] if empty else corpus.find(parsed, limit)

    @tool(name=f"read_{source}", idempotent=True)
    async def read(document: str, query: str, limit: int = passages) -> list[Passage]:
        """The best passages of one document for `query`."""
        parsed = _parse(query)
        if document not in corpus.documents:
            raise InvalidInput(f"{source} has no document {document!r}", error_type="not_found")
        call = f"read {document} {query}"
        empty = await _struck(faults, source, call, call_timeout, parsed)
        return [] if empty else corpus.read(document, parsed, limit)

    search = subagent(name=source, retry=RETRY, checkpoint=True)(_in_turn(find, read, analyse))
    search.description = f"Searches {corpus.description}."
    return search


def openings_agent(
    openings: Openings,
    corpora: Mapping[str, Corpus],
    faults: FaultInjector,
    *,
    call_timeout: float = CALL_TIMEOUT,
) -> Subagent:
    """The subagent `OPENINGS`: it reads the documents of every source whose openings are
    closest in meaning to its task's query, the whole question (`Openings.nearest`).
    A source's faults (`faults`) strike the route's reads of its documents too: it reads
    the same source.

    The words' search cannot reach a document none of the question's words is in ("make
    my script pause for half a second" and `time.sleep`); this one ranks by meaning
    alone, so its passages are kept as read, whatever their words (the merge gives them
    their own places: `merge.AFTER_WORDS`). A document's passage is its best for the
    question's words, or its first when it has none of them."""
    source = OPENINGS

    @tool(name=f"find_{source}", idempotent=True)
    async def find(query: str, limit: int = NEAREST) -> list[str]:
        """The documents ("<source>:<document>") closest in meaning to `query`, a question."""
        if await _struck(faults, source, f"find {query}", call_timeout, None):
            return []
        try:
            # The encoder reads the question (~20 ms): not on the loop that serves the run.
            nearest = await asyncio.to_thread(openings.nearest, query, limit)
        except OpeningsUnavailable as exc:
            # Not retried: the same encoder on the same openings fails the same way.
            raise AgentError(
                f"{source}: {exc}", error_type="encoder_failed", retryable=False
            ) from None
        return [document for document, _ in nearest]

    @tool(name=f"read_{source}", idempotent=True)
    async def read(document: str, query: str) -> list[Passage]:
        """One document's passage best for `query`'s words, or its first passage."""
        name, _, inside = document.partition(":")
        corpus = corpora.get(name)
        if corpus is None or inside not in corpus.documents:
            raise InvalidInput(f"{source} has no document {document!r}", error_type="not_found")
        parsed = _parse(query)
        if await _struck(faults, name, f"read {document} {query}", call_timeout, parsed):
            return []
        best = corpus.read(inside, parsed, 1)
        first = None if best else corpus.opening(inside)
        return best if first is None else [first]

    async def as_read(ctx: Context, query: str, passages: Sequence[Passage]) -> list[Passage]:
        return list(passages)

    search = subagent(name=source, retry=RETRY, checkpoint=True)(_in_turn(find, read, as_read))
    search.description = "Reads the documents closest in meaning to the question (openings)."
    return search


async def _struck(
    faults: FaultInjector, source: str, call: str, seconds: float, query: Query | None
) -> bool:
    """Whether an injected fault of `source` answers `call` empty (one that fails it
    raises), asked within `seconds` (`answer_within`); `query` None: plain words."""
    plain = query is None or not query.has_syntax
    return await answer_within(
        seconds, source, lambda: faults.strike(source, call, plain_query=plain)
    )


def _in_turn(
    find: Tool[..., list[str]], read: Tool[..., list[Passage]], analyse: Analyse
) -> Callable[[Task, Context], Awaitable[list[Passage]]]:
    """A subagent's body: find the documents, read them one by one, analyse what was read."""

    async def search(task: Task, ctx: Context) -> list[Passage]:
        # The documents an earlier attempt or run found, in rank order (read ones first,
        # since they are read in order); none saved: search for them.
        documents = [*ctx.partials.completed, *ctx.partials.pending]
        if not documents:
            documents = await ctx.call(find, query=task.query)
            ctx.record_partial(pending=documents)
        for document in documents:
            if document in ctx.partials.completed:
                continue  # read before: its passages are among the findings already
            # A failure here propagates with the documents read so far as partial results.
            hits = await ctx.call(read, document=document, query=task.query)
            ctx.record_partial(hits, completed=document)
        # Everything read is recorded: if the analysis fails, the task ends partial.
        found: list[Passage] = list(ctx.partials.findings)
        return await analyse(ctx, task.query, found)

    return search


def plain_words(task: Task, envelope: ErrorEnvelope) -> str | None:
    """The deterministic rewriter: drop the query syntax a source rejected.

    The coordinator calls it for a validation failure; what it returns is tried as a
    new query (retry with feedback). None means "no correction to offer", and the
    router records a gap.
    """
    if envelope.error_type != "invalid_query":
        return None
    plain = " ".join(task.query.replace('"', " ").split())
    return plain if plain and plain != task.query else None


async def answer_within(seconds: float, source: str, ask_source: Callable[[], Awaitable[T]]) -> T:
    """What `source` answers (`ask_source()`, called in a task of its own), or
    TimeoutError naming it if it has not answered `seconds` after it was asked: the wait
    on a stuck backend is given up (and the call retried).

    The source's own time is bounded, not this call's wait for the event loop. While it
    waits, other tasks score passages synchronously for tens to hundreds of
    milliseconds. With `asyncio.timeout` around the await, a prompt answer and the
    deadline fall due in the same turn of a loop that was busy, and the timer, first in
    line, cancels the call that had its answer: a spurious retry, or a gap in the
    report. So the source is asked in a task of its own; the clock starts when that task
    asks it (not when this call meant to); and past the deadline, this call lets the
    loop take one more turn, so that an answer that arrived while the loop was busy
    elsewhere reaches the asking task, before giving up.
    """
    loop = asyncio.get_running_loop()
    asked_at = 0.0  # when the source was asked: set by the asking task, which runs first

    async def ask() -> T:
        nonlocal asked_at
        # The call is made here, not by the caller: a wait cancelled before this task
        # starts leaves no coroutine never awaited.
        asked_at = loop.time()
        return await ask_source()

    asking = loop.create_task(ask())
    try:
        due = seconds
        while not asking.done():
            await asyncio.wait((asking,), timeout=max(due, 0))
            if due <= 0:
                break  # the last look, a turn after the deadline: no answer
            due = asked_at + seconds - loop.time()
    finally:
        # Given up, or this call was cancelled: the source stops waiting before this call
        # ends (a retry asks again). Already done: cancel() only drops its outcome's log.
        if asking.cancel():
            await asyncio.wait((asking,))
    if asking.cancelled():
        raise TimeoutError(f"{source} did not answer within {seconds:g}s")
    return asking.result()  # the answer, or the source's error (its own type)


def _parse(query: str) -> Query:
    try:
        return parse_query(query)
    except QuerySyntaxError as exc:
        raise InvalidInput(str(exc), error_type="invalid_query") from None
