"""The offline planner: a question split into 2 to 5 subtopics, each with a search query.

Deterministic and shallow on purpose; it reads the question's wording, not its meaning:

1. The question is read as words (`question_words`): a possessive loses its "'s"
   ("Perl's" is "perl"), a contraction ("can't", "don't", "it's") is a function word,
   and code stays whole: `chomp()` is "chomp", `os.remove` is "os.remove". A hyphenated
   compound is words of one phrase: "fixed-size chunks" is "fixed size chunks".
2. The question is cut into phrases at punctuation, at conjunctions ("and", "or",
   "vs") and at filler words: function words, question words and the generic verbs of a
   question ("how does X handle Y"). "Python" counts as filler: every source is about
   Python. A Python keyword is kept when it names a construct ("the with statement",
   "a for loop") or is quoted. Nouns such as "list", "tuple" or "type" are content.
3. The first subtopic is always the whole question: its query is the words of all its
   phrases, in order (nothing the user asked about is dropped from it).
4. Each phrase is a further subtopic, in the question's order, up to five subtopics in
   all (the rest are listed in the plan as dropped). Its query requires the phrase's
   last two words (in double quotes: the head of an English noun phrase) and ranks by
   the first phrase's words too, unless the first phrase opens a list ("compare A, B
   and C"): `"cancellation" asyncio tasks`.

It does not rephrase, resolve synonyms, or know that two phrases mean the same thing.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from .text import ENGLISH_STOPWORDS, join_numbered

__all__ = ["MAX_SUBTOPICS", "WHOLE_QUESTION", "Plan", "Subtopic", "plan", "question_words"]

MAX_SUBTOPICS = 5
WHOLE_QUESTION = "whole question"  # the title of the first subtopic

# Word lists read better as text than as list literals.
_FILLER = ENGLISH_STOPWORDS | frozenset(
    """
    python pythons explain describe tell show give compare difference differences
    happen happens handle handles handled handling work works working use uses used using
    make makes made mean means meaning way ways best good need needs write written call
    called something anything thing things kind kinds like want wants possible go
    program programs programming code script scripts correct correctly proper properly
    instead really actually there know equivalent alternative similar
    """.split()  # noqa: SIM905
)
_CONSTRUCTS = frozenset(
    """
    statement statements loop loops clause clauses keyword keywords expression expressions
    block blocks operator operators
    """.split()  # noqa: SIM905
)
_KEYWORDS = frozenset(k.lower() for k in (*keyword.kwlist, *keyword.softkwlist))
_CONJUNCTIONS = frozenset({"and", "or", "nor", "vs", "versus"})

# A word: an identifier, dotted names kept whole (`os.remove`), an optional call's
# parentheses (`chomp()`), or an apostrophe suffix ("Perl's", "can't"). A quoted word
# is a word in matching quotes or backticks. Anything else that is not a space breaks
# a phrase.
_TOKEN = re.compile(
    r"""(?<![\w'])(?P<q>[`'"])(?P<quoted>[A-Za-z_][\w.]*)(?:\(\))?(?P=q)(?!\w)"""
    r"""|(?P<word>[A-Za-z_](?:[\w]|\.(?=[A-Za-z_]))*)(?P<call>\(\))?(?:'(?P<suffix>[A-Za-z]+))?"""
    r"""|(?P<stop>[^\sA-Za-z_'`"])"""
)
_HYPHENATED = re.compile(r"(?<=[A-Za-z])-(?=[A-Za-z])")
_TYPOGRAPHIC = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})
# After an apostrophe: "n't" and the short forms of verbs make a function word.
_CONTRACTED = frozenset({"t", "re", "ve", "ll", "d", "m"})


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


@dataclass(frozen=True, slots=True)
class _Word:
    text: str  # lower-cased; a possessive without its "'s", code without its "()"
    quoted: bool = False
    code: bool = False  # written as code: a call, a dotted name, quoted
    function_word: bool = False  # a contraction, or an English function word
    stop: str | None = None  # a punctuation mark that breaks a phrase


def question_words(question: str) -> list[str]:
    """The question's content words, in order: the words of all its phrases."""
    phrases, _ = _phrases(_read(question))
    return " ".join(phrases).split()


def plan(question: str) -> Plan:
    """Split `question` into subtopics; raises ValueError when it has no searchable word."""
    phrases, listed = _phrases(_read(question))
    if not phrases:
        raise ValueError(f"the question {question!r} has no searchable word")
    whole = Subtopic(title=WHOLE_QUESTION, query=" ".join(phrases))
    kept, dropped = phrases[: MAX_SUBTOPICS - 1], phrases[MAX_SUBTOPICS - 1 :]
    subject = kept[0]
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
    return Plan(question=question, subtopics=(whole, *subtopics), dropped=tuple(dropped))


def _read(question: str) -> list[_Word]:
    # Typographic apostrophes and quotes as their ASCII forms: "Perl\u2019s" is "Perl's".
    text = question.translate(_TYPOGRAPHIC)
    text = join_numbered(text)  # "SHA-256" is "sha256", as the index has it
    # A hyphenated compound is words of one phrase: "fixed-size chunks", "command-line".
    text = _HYPHENATED.sub(" ", text)
    found: list[_Word] = []
    for match in _TOKEN.finditer(text):
        if match["stop"] is not None:
            found.append(_Word(text="", stop=match["stop"]))
        elif match["quoted"] is not None:
            found.append(_Word(text=match["quoted"].lower(), quoted=True, code=True))
        else:
            word = match["word"].lower()
            suffix = (match["suffix"] or "").lower()
            function_word = (
                suffix in _CONTRACTED or (word in ENGLISH_STOPWORDS and word not in _KEYWORDS)
            ) and match["call"] is None
            code = match["call"] is not None or "." in word or "_" in word
            found.append(_Word(text=word, code=code, function_word=function_word))
    return found


def _phrases(words: list[_Word]) -> tuple[list[str], bool]:
    """The question's phrases, and whether the first one opens a list (no subject then)."""
    phrases: list[str] = []
    current: list[str] = []
    listed = False
    for position, word in enumerate(words):
        following = words[position + 1] if position + 1 < len(words) else None
        breaks, separator = _breaks(word, following)
        if not breaks:
            current.append(word.text)
            continue
        phrase = " ".join(current)
        if current and phrase not in phrases:
            if not phrases:
                listed = separator
            phrases.append(phrase)
        current = []
    if current and " ".join(current) not in phrases:
        phrases.append(" ".join(current))
    return phrases, listed


def _breaks(word: _Word, following: _Word | None) -> tuple[bool, bool]:
    """Whether `word` ends the phrase, and whether it separates items of a list."""
    if word.stop is not None:
        return True, word.stop in ",;/&"
    if word.quoted or word.code:
        return False, False
    if word.text in _KEYWORDS and following is not None and following.text in _CONSTRUCTS:
        return False, False
    if word.text in _CONJUNCTIONS:
        return True, True
    return word.function_word or word.text in _FILLER, False


def _required(phrase: str) -> str:
    """The phrase with its last two words quoted: those must appear in a passage."""
    words = phrase.split()
    head, rest = words[-2:], words[:-2]
    return " ".join([*rest, '"' + " ".join(head) + '"'])
