"""Words: the tokenizer every index shares (passages are cut by `shapes.chunk`)."""

from __future__ import annotations

import keyword
import re
from functools import lru_cache

import Stemmer

__all__ = [
    "ENGLISH_STOPWORDS",
    "STOPWORDS",
    "join_numbered",
    "split_identifier",
    "stem",
    "terms",
    "words",
]

# English function words.
ENGLISH_STOPWORDS = frozenset(
    # A word list reads better as text than as a list literal.
    """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    either else etc even ever every few for from further get gets had has have having he
    her here hers him his how i if in into is it its itself just may me might more most
    must my no nor not now of off on once only or other our out over own per same shall
    she should so some such than that the their them then there these they this those
    through to too under until up upon us very via was we were what when where which
    while who whom why will with within without would yet you your
    """.split()  # noqa: SIM905
)
# Python's keywords are words people search for ("the with statement"): index them.
STOPWORDS = ENGLISH_STOPWORDS - {*keyword.kwlist, *keyword.softkwlist}

# A contraction ("won't", typographic apostrophe too) is one word, not "won".
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:['\u2019][a-z]+)?")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STEMMER = Stemmer.Stemmer("english")


def words(text: str) -> list[str]:
    """The words of `text`, lower-cased, without stopwords (not stemmed)."""
    text = join_numbered(text)
    found = (w.lower().replace("\u2019", "'").removesuffix("'s") for w in _WORD.findall(text))
    return [w for w in found if w not in STOPWORDS and len(w) > 1]


_NUMBERED = re.compile(r"(?<=[A-Za-z])-(?=[0-9])")


def join_numbered(text: str) -> str:
    """A name and its number as one word, as in code: "SHA-256" is "SHA256", "UTF-8" "UTF8"."""
    return _NUMBERED.sub("", text)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """One lower-case word's index term: "cancellation" is "cancel"."""
    return str(_STEMMER.stemWord(word))


def terms(text: str) -> list[str]:
    """Index terms: words, stemmed, so that "cancelled" and "cancellation" meet at "cancel"."""
    return [stem(w) for w in words(text)]


def split_identifier(name: str) -> str:
    """`AbstractContextManager` or `wait_for` as the words a person would search for."""
    parts = [p for piece in name.split("_") for p in _CAMEL.findall(piece)]
    return " ".join(parts)
