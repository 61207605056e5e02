"""The offline planner: a question split into 2 to 5 subtopics, each with a search query.

Deterministic and shallow on purpose; it reads the question's wording, not its meaning:

1. The question is cut into phrases at punctuation, at conjunctions ("and", "or",
   "vs") and at filler words: English function words, question words and the generic
   verbs of a question ("how does X handle Y"). "Python" counts as filler: every
   source is about Python. A Python keyword is kept when it names a construct ("the
   with statement", "a for loop") or is quoted in the question.
2. Each phrase is a subtopic, in the question's order; after the fifth, phrases are
   dropped (and listed in the plan). The first phrase is taken as the subject, unless
   it opens a list ("compare A, B and C").
3. A subtopic's query requires its own phrase's last two words (in double quotes: the
   head of an English noun phrase) and ranks by the subject's words too:
   "asyncio tasks", "cancellation" and "timeouts" become `"asyncio tasks"`,
   `"cancellation" asyncio tasks` and `"timeouts" asyncio tasks`.
4. A question with a single phrase gets two facets: the phrase itself, and the phrase
   with "example usage" to rank passages that show it in use.

It does not rephrase, resolve synonyms, or know that two phrases mean the same thing.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from .text import ENGLISH_STOPWORDS

__all__ = ["MAX_SUBTOPICS", "Plan", "Subtopic", "plan"]

MAX_SUBTOPICS = 5

# Word lists read better as text than as list literals.
_FILLER = ENGLISH_STOPWORDS | frozenset(
    """
    python pythons explain describe tell show give list compare difference differences
    happen happens handle handles handled handling work works working use uses used using
    make makes made mean means meaning way ways best good need needs write written call
    called something anything thing things kind kinds type types like
    """.split()  # noqa: SIM905
)
_CONSTRUCTS = frozenset(
    """
    statement statements loop loops clause clauses keyword keywords expression expressions
    block blocks
    """.split()  # noqa: SIM905
)
_KEYWORDS = frozenset(k.lower() for k in (*keyword.kwlist, *keyword.softkwlist))
# Words (identifiers with dots and underscores stay whole), quoted words, and breaks.
_TOKEN = re.compile(
    r"""(?P<quoted>[`'"]\w+[`'"])|(?P<word>[A-Za-z_][\w.]*\w|[A-Za-z])|(?P<stop>[^\sA-Za-z_])"""
)
_CONJUNCTIONS = frozenset({"and", "or", "nor", "vs", "versus"})


@dataclass(frozen=True, slots=True)
class Subtopic:
    """One part of the question and the query each source is searched with."""

    title: str
    query: str


@dataclass(frozen=True, slots=True)
class Plan:
    question: str
    subtopics: tuple[Subtopic, ...]
    dropped: tuple[str, ...] = ()


def plan(question: str) -> Plan:
    """Split `question` into subtopics; raises ValueError when it has no searchable word."""
    phrases, listed = _phrases(question)
    if not phrases:
        raise ValueError(f"the question {question!r} has no searchable word")
    kept, dropped = phrases[:MAX_SUBTOPICS], phrases[MAX_SUBTOPICS:]
    subject = kept[0]
    subtopics: tuple[Subtopic, ...]
    if len(kept) == 1:
        subtopics = (
            Subtopic(title=subject, query=_required(subject)),
            Subtopic(
                title=f"{subject}: example usage", query=f"{_required(subject)} example usage"
            ),
        )
    else:
        subtopics = tuple(
            Subtopic(
                title=phrase,
                query=(
                    f"{_required(phrase)} {subject}"
                    if phrase != subject and not listed
                    else _required(phrase)
                ),
            )
            for phrase in kept
        )
    return Plan(question=question, subtopics=subtopics, dropped=tuple(dropped))


def _phrases(question: str) -> tuple[list[str], bool]:
    """The question's phrases, and whether the first one opens a list (no subject then)."""
    tokens = list(_TOKEN.finditer(question))
    phrases: list[str] = []
    current: list[str] = []
    listed = False

    def close(separator: bool = False) -> None:
        nonlocal listed
        phrase = " ".join(current)
        if current and phrase not in phrases:
            if not phrases:
                listed = separator
            phrases.append(phrase)
        current.clear()

    for position, match in enumerate(tokens):
        if match["stop"] is not None:
            # A dot or hyphen inside a word was taken with it; what is left is a break.
            close(separator=match["stop"] in ",;/&")
            continue
        if match["quoted"] is not None:
            current.append(match["quoted"][1:-1].lower())
            continue
        word = match["word"].lower()
        following = tokens[position + 1]["word"] if position + 1 < len(tokens) else None
        names_construct = following is not None and following.lower() in _CONSTRUCTS
        if word in _KEYWORDS and names_construct:
            current.append(word)
        elif word in _CONJUNCTIONS:
            close(separator=True)
        elif word in _FILLER:
            close()
        else:
            current.append(word)
    close()
    return phrases, listed


def _required(phrase: str) -> str:
    """The phrase with its last two words quoted: those must appear in a passage."""
    words = phrase.split()
    head, rest = words[-2:], words[:-2]
    return " ".join([*rest, '"' + " ".join(head) + '"'])
