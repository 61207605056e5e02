"""Names written as one lower-case word, read as the words a person types.

`re.findall` is what "find all matches" asks for, `readline` what "read a line" does,
`makedirs` what "make directories" means; `split_identifier` cannot cut them (no
underscore, no capital). A name is cut in two where both halves are words the source
uses in its prose (or English function words): "findall" is "find all". The name
itself stays a term too, so a search for `findall` still finds it.

Only names are cut, never prose: in a docstring's sentences "nowhere" is one word.
"""

from __future__ import annotations

from collections.abc import Set

from .text import ENGLISH_STOPWORDS, STOPWORDS, stem

__all__ = ["MIN_PART", "Compounds"]

# Shorter halves cut too much: "is" + "land", "up" + "date".
MIN_PART = 3


class Compounds:
    """Cuts names with one source's prose terms (stemmed, as `text.terms` makes them)."""

    def __init__(self, known: Set[str]) -> None:
        self._known = known
        self._halves: dict[str, tuple[str, ...]] = {}  # a source repeats its names

    def terms(self, name: str) -> tuple[str, ...]:
        """The index terms of the halves of `name`, () unless it is two known words."""
        word = name.lower()
        if word not in self._halves:
            self._halves[word] = self._cut(word)
        return self._halves[word]

    def _cut(self, word: str) -> tuple[str, ...]:
        if not word.isalpha() or len(word) < 2 * MIN_PART:
            return ()
        # The longest known first half: "startswith" is "starts with", not "start swith".
        for cut in range(len(word) - MIN_PART, MIN_PART - 1, -1):
            head, tail = word[:cut], word[cut:]
            if self._is_word(head) and self._is_word(tail):
                return tuple(stem(half) for half in (head, tail) if half not in STOPWORDS)
        return ()

    def _is_word(self, part: str) -> bool:
        return part in ENGLISH_STOPWORDS or stem(part) in self._known
