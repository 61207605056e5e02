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
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeAlias

from agentmesh import (
    Context,
    ErrorEnvelope,
    InvalidInput,
    RetryPolicy,
    Subagent,
    Task,
    subagent,
    tool,
)

from .analysis import relevant
from .injection import FaultInjector
from .ranking import Query, QuerySyntaxError, parse_query
from .relevance import Scorer
from .sources import Corpus, Passage

__all__ = ["CALL_TIMEOUT", "RETRY", "Analyse", "offline_analysis", "plain_words", "search_agent"]

# A search that has not answered in this time is stuck: give up on the attempt.
CALL_TIMEOUT = 0.2
# Small real delays: a transient fault is retried within a fraction of a second.
RETRY = RetryPolicy(max_attempts=5, initial_delay=0.05, max_delay=0.4)

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
    """The subagent that searches `corpus`, named after it; a search call that has not
    answered within `call_timeout` seconds is given up (and retried)."""
    source = corpus.name

    @tool(name=f"find_{source}", idempotent=True)
    async def find(query: str, limit: int = documents) -> list[str]:
        """Rank the source's documents for `query`; quoted words must appear."""
        parsed = _parse(query)
        async with _answer_within(call_timeout, source):
            empty = await faults.strike(source, f"find {query}", plain_query=not parsed.has_syntax)
            return [] if empty else corpus.find(parsed, limit)

    @tool(name=f"read_{source}", idempotent=True)
    async def read(document: str, query: str, limit: int = passages) -> list[Passage]:
        """The best passages of one document for `query`."""
        parsed = _parse(query)
        if document not in corpus.documents:
            raise InvalidInput(f"{source} has no document {document!r}", error_type="not_found")
        async with _answer_within(call_timeout, source):
            call = f"read {document} {query}"
            empty = await faults.strike(source, call, plain_query=not parsed.has_syntax)
            return [] if empty else corpus.read(document, parsed, limit)

    @subagent(name=source, retry=RETRY, checkpoint=True)
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

    search.description = f"Searches {corpus.description}."
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


@asynccontextmanager
async def _answer_within(seconds: float, source: str) -> AsyncIterator[None]:
    """asyncio.timeout, with a message that says which source did not answer."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise TimeoutError(f"{source} did not answer within {seconds:g}s") from None


def _parse(query: str) -> Query:
    try:
        return parse_query(query)
    except QuerySyntaxError as exc:
        raise InvalidInput(str(exc), error_type="invalid_query") from None
