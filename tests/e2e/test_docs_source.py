"""The `docs` source: Python's documentation pages, cited by section, on three small pages
written here in the documentation's own format (reST, as Debian's python3.X-doc installs it)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from examples.research_agent.manual import deprecated_modules, documentation_root, page_sections
from examples.research_agent.ranking import parse_query
from examples.research_agent.relevance import Scorer
from examples.research_agent.sources import DocsCorpus, Passage

ATEXIT = """\
:mod:`atexit` --- Exit handlers
===============================

.. module:: atexit
   :synopsis: Register and execute cleanup functions.

.. index:: single: exit

The :mod:`atexit` module defines functions to register and unregister cleanup
functions.  Functions thus registered are automatically executed upon normal
interpreter termination.

.. function:: register(func, *args, **kwargs)

   Register *func* as a function to be executed at termination.

   .. note::

      The registered functions are not called when the program is killed by a signal.

.. function:: unregister(func)

   Remove *func* from the list of functions to be run at interpreter shutdown.
"""

CLASSES = """\
*******
Classes
*******

Classes provide a means of bundling data and functionality together.

Class and Instance Variables
============================

Generally speaking, instance variables are for data unique to each instance and
class variables are for attributes and methods shared by all instances::

    class Dog:
        kind = 'canine'         # class variable shared by all instances
"""

COPY = """\
:mod:`!copy` --- Shallow and deep copy operations
=================================================

.. module:: copy

A shallow copy constructs a new compound object and then inserts references into it;
a deep copy inserts copies of the objects found in the original.

.. function:: deepcopy(x[, memo])

   Return a deep copy of *x*, nested lists and all.
"""


@pytest.fixture
def pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for page, text in {
        "library/atexit": ATEXIT,
        "library/copy": COPY,
        "tutorial/classes": CLASSES,
    }.items():
        path = tmp_path / f"{page}.rst.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "faq").mkdir()
    (tmp_path / "faq" / "library.rst.txt").write_text(ATEXIT, encoding="utf-8")
    monkeypatch.setenv("RESEARCH_AGENT_DOCS", str(tmp_path))
    return tmp_path


def test_sections_and_documented_names_are_units_with_sphinx_anchors() -> None:
    """Each section and each documented function is a unit: its anchor, its module, its
    text without markup."""
    units = {s.anchor: s for s in page_sections(ATEXIT)}
    assert list(units) == ["atexit-exit-handlers", "atexit.register", "atexit.unregister"]
    assert all(s.module == "atexit" for s in units.values())
    register = units["atexit.register"].text
    assert register.startswith("register(func, *args, **kwargs)")
    assert "Note." in register
    assert "killed by a signal" in register
    assert ":mod:" not in units["atexit-exit-handlers"].text
    assert "index" not in units["atexit-exit-handlers"].text


def test_a_literal_block_stays_code() -> None:
    """`::` introduces a code block, which keeps its lines."""
    (_, variables) = page_sections(CLASSES)
    assert variables.anchor == "class-and-instance-variables"
    assert variables.heading == "Classes > Class and Instance Variables"
    assert "\n    class Dog:" in variables.text


def test_the_pages_are_searched_and_cited_by_section(pages: Path) -> None:
    """The pages are found by their words and cited `docs:<page>#<anchor>`, naming the
    module a library page documents; the FAQ is not indexed (a held-out set)."""
    corpus = DocsCorpus.load()
    assert set(corpus.documents) == {"library/atexit", "library/copy", "tutorial/classes"}
    query = parse_query("functions executed at interpreter termination")
    assert corpus.find(query, 3)[0] == "library/atexit"
    passages = corpus.read("library/atexit", query, 3)
    assert passages[0]["id"] == "docs:library/atexit#atexit-exit-handlers"
    assert passages[0]["module"] == "atexit"
    shared = corpus.read("tutorial/classes", parse_query("shared by all instances"), 1)
    assert shared[0]["id"] == "docs:tutorial/classes#class-and-instance-variables"
    assert "module" not in shared[0]


def test_without_documentation_the_source_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pages on the machine (or `RESEARCH_AGENT_DOCS` empty): no `docs` source."""
    monkeypatch.setenv("RESEARCH_AGENT_DOCS", "")
    assert documentation_root() is None
    with pytest.raises(FileNotFoundError):
        DocsCorpus.load()


def test_a_module_the_documentation_deprecates_is_known() -> None:
    """`.. module:: aifc` with `:deprecated:` names aifc; atexit's page names none."""
    aifc = ".. module:: aifc\n   :synopsis: Read and write AIFF files.\n   :deprecated:\n"
    assert deprecated_modules(aifc) == ["aifc"]
    assert deprecated_modules(ATEXIT) == []


def test_a_deprecated_modules_passage_ranks_below_an_equal_one() -> None:
    scorer = Scorer(Counter({"audio": 3, "file": 300}), 1000, deprecated=["aifc"])
    old = Passage(
        source="docs", id="docs:library/aifc", document="a", section="", text="audio file", score=1
    )
    current = Passage(**{**old, "id": "docs:library/wave"})
    old["module"], current["module"] = "aifc", "wave"
    assert scorer.relevance("audio file", old) < scorer.relevance("audio file", current)
