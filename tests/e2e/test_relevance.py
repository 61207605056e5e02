"""The research agent's relevance: the planner's reading of a question, honest coverage,
the merged ranking, passages that keep their shape (real corpora, no doubles)."""

from __future__ import annotations

import asyncio
import difflib
from collections import Counter
from functools import cache

import pytest

from agentmesh import Report
from agentmesh.report import Finding
from examples.research_agent.analysis import relevant
from examples.research_agent.compounds import Compounds
from examples.research_agent.eval import (
    HOLDOUT2_QUESTIONS,
    HOLDOUT3_QUESTIONS,
    HOLDOUT4_QUESTIONS,
    HOLDOUT5_QUESTIONS,
    HOLDOUT6_QUESTIONS,
    HOLDOUT7_QUESTIONS,
    HOLDOUT8_QUESTIONS,
    TEST_QUESTIONS,
    Expected,
    Score,
    load_questions,
)
from examples.research_agent.eval.__main__ import SETS, main, parse_sets
from examples.research_agent.eval.scoring import summary
from examples.research_agent.injection import FaultInjector
from examples.research_agent.manual import PARTS, documentation_root
from examples.research_agent.merge import _diversified
from examples.research_agent.passages import to_html, to_markdown
from examples.research_agent.planner import WHOLE_QUESTION, plan, question_words
from examples.research_agent.ranking import parse_query
from examples.research_agent.relevance import FLOOR, LOWEST, SOURCE_WEIGHTS, Scorer
from examples.research_agent.research import research
from examples.research_agent.shapes import chunk
from examples.research_agent.sources import SOURCES, Corpus, Passage, StdlibCorpus, load_corpus

# The sample question: its subtopics find some of the same pydoc passages.
# How alike (difflib's ratio) a development question and a test question may be.
NEAR = 0.75
QUESTION_OF_SHARED_PASSAGES = "How does the with statement handle exceptions in context managers?"


@cache
def corpora() -> dict[str, Corpus]:
    return {name: load_corpus(name) for name in SOURCES}


@cache
def report(question: str) -> Report:
    return asyncio.run(research(plan(question), corpora(), faults=FaultInjector()))


def queries(question: str) -> list[str]:
    return [s.query for s in plan(question).subtopics]


class TestPlanner:
    def test_possessive_loses_its_s(self) -> None:
        """ "Perl's chomp()" is the words perl and chomp, never the term "s chomp"."""
        words = question_words("Is there an equivalent to Perl's chomp() for strings?")
        assert words[:2] == ["perl", "chomp"]
        assert "s" not in words
        assert question_words("What does Perl\u2019s chomp() do?")[:2] == ["perl", "chomp"]

    def test_contractions_are_function_words(self) -> None:
        """ "can't" and "don't" leave nothing behind: no "t", no "don"."""
        words = question_words("Why can't I import a module, and why don't tests see it?")
        assert not {"t", "can", "don", "can't", "don't"} & set(words)
        assert {"import", "module", "tests"} <= set(words)

    def test_code_stays_whole(self) -> None:
        """A call and a dotted name are one word each: `chomp()` and `os.remove`."""
        assert question_words("Why does os.remove fail on a directory?") == [
            "os.remove",
            "fail",
            "directory",
        ]
        assert "chomp" in question_words("Is chomp() in Python?")
        assert question_words("How do I use `shutil.copy`?") == ["shutil.copy"]

    def test_hyphenated_compound_is_one_phrase(self) -> None:
        """ "fixed-size chunks" is one phrase, not "fixed" and "size chunks"."""
        assert (
            queries("How do I read a file in fixed-size chunks?")[-1] == 'fixed "size chunks" read'
        )

    def test_list_and_tuple_are_kept(self) -> None:
        """The content words of "list vs tuple" are searched, "list" included."""
        subtopics = plan("What is the difference between a list and a tuple?").subtopics
        assert [s.query for s in subtopics] == ["list tuple", '"list"', '"tuple"']

    def test_whole_question_is_always_a_query(self) -> None:
        """The first subtopic searches every content word of the question."""
        for question in ("How do I copy a file?", "How do asyncio tasks handle cancellation?"):
            first = plan(question).subtopics[0]
            assert first.title == WHOLE_QUESTION
            assert first.query == " ".join(question_words(question))

    def test_different_questions_different_subtopics(self) -> None:
        """Questions that share a verb are not planned alike."""
        assert queries("How do I copy a file?") != queries("How do I copy an object?")
        assert queries("How do I program using threads?") != queries("My program is too slow")
        assert "program" not in " ".join(queries("How do I program using threads?"))


class TestCoverage:
    def test_nothing_relevant_is_empty_not_covered(self) -> None:
        """A question the sources cannot answer covers nothing: every entry is empty, with
        the reason "nothing relevant found", and the report has no findings."""
        found = report("How do I bake sourdough bread at home?")
        assert found.coverage
        assert {(e.status.value, e.reason) for e in found.coverage} == {
            ("empty", "nothing relevant found")
        }
        assert not found.findings

    def test_covered_entries_have_relevant_findings(self) -> None:
        """Each covered entry has a finding of its own subtopic and source: listed under
        it, or under another subtopic that found the same passage (`also_topics`)."""
        found = report("How do I read a CSV file with a custom delimiter?")
        covered = [e for e in found.coverage if e.status.value == "covered"]
        assert covered
        for entry in covered:
            assert any(
                entry.topic in (f.topic, *f.content.get("also_topics", ()))
                and f.source == entry.source
                for f in found.findings
            )

    def test_a_passage_two_subtopics_found_is_listed_once_and_covers_both(self) -> None:
        """A passage found by two subtopics is one finding; both entries have it (covered
        when it answers the subtopic, partial with the reason when it may not)."""
        found = report(QUESTION_OF_SHARED_PASSAGES)
        shared = [f for f in found.findings if f.content.get("also_topics")]
        assert shared
        keys = [(f.content["id"], f.content["text"]) for f in found.findings]
        assert len(keys) == len(set(keys))
        status = {(e.topic, e.source): e.status.value for e in found.coverage}
        for finding in shared:
            for topic in (finding.topic, *finding.content["also_topics"]):
                assert status[(topic, finding.source)] in ("covered", "partial")


class TestRanking:
    def test_findings_in_one_ranking_with_stable_ids(self) -> None:
        """Findings are ordered by one relevance score across tasks, each with its id."""
        found = report("How does the with statement handle exceptions in context managers?")
        scores = [f.content["relevance"] for f in found.findings]
        assert scores[0] == max(scores)
        assert {f.content["id"].split(":")[0] for f in found.findings} <= set(SOURCES)
        assert len({f.topic for f in found.findings[:5]}) >= 2  # not one task's list

    def test_sample_question_leads_with_pydoc_with(self) -> None:
        """The README's sample question opens with the `with` / context-manager topics."""
        found = report("How does the with statement handle exceptions in context managers?")
        assert found.findings[0].content["id"] in {"pydoc:with", "pydoc:context-managers"}

    def test_duplicates_collapsed(self) -> None:
        """One passage of one document appears once, whichever subtopics found it."""
        found = report("How does the with statement handle exceptions in context managers?")
        keys = [(f.content["id"], f.content["text"]) for f in found.findings]
        assert len(keys) == len(set(keys))

    @pytest.mark.parametrize(
        ("question", "module"),
        [
            ("How do I insert an item into a sorted list and keep it sorted?", "stdlib:bisect"),
            ("How do I compare two floats for approximate equality?", "stdlib:math"),
        ],
    )
    def test_function_first_lines_and_c_modules_are_searched(
        self, question: str, module: str
    ) -> None:
        """A function's docstring line (bisect.insort) or a C module (math) is found."""
        ids = [f.content["id"] for f in report(question).findings[:10]]
        assert any(i == module or i.startswith(f"{module}.") for i in ids), ids


class TestUndocumentedModules:
    def test_module_that_reexports_is_read_from_its_implementation(self) -> None:
        """`decimal` has no docstring of its own: its passages come from `_pydecimal.py`."""
        stdlib = corpora()["stdlib"]
        query = parse_query("decimal context rounding precision")
        assert "decimal" in stdlib.find(query, 3)
        passages = stdlib.read("decimal", query, 3)
        assert passages
        assert all("_pydecimal.py:" in p["section"] for p in passages)
        assert all(p["id"].startswith("stdlib:decimal") for p in passages)

    def test_package_without_docstring_is_read_from_its_private_modules(self) -> None:
        """`zoneinfo` re-exports `_tzpath` and `_common`: they document it, and it is found."""
        stdlib = corpora()["stdlib"]
        query = parse_query("available time zones")
        passages = stdlib.read("zoneinfo", query, 3)
        assert any("zoneinfo/_tzpath.py:" in p["section"] for p in passages), passages
        assert passages[0]["id"] == "stdlib:zoneinfo.available_timezones"
        found = report("How do I convert a datetime to another time zone?").findings[:10]
        assert any(f.content["id"].startswith("stdlib:zoneinfo") for f in found)

    def test_c_module_without_docstring_is_found_by_its_namesake_type(self) -> None:
        """`mmap` is searched by the words of `mmap.mmap`'s docstring and found."""
        assert "anonymous memory" in corpora()["stdlib"].documents["mmap"].text
        found = report("What is a memory-mapped file object?").findings[:10]
        assert any(f.content["id"].startswith("stdlib:mmap") for f in found)


class TestShapes:
    def test_table_and_code_keep_their_shape(self) -> None:
        """A grid table becomes a Markdown and an HTML table; a literal block a code block."""
        text = (
            "The operations:\n\n"
            "+-------+--------+\n| Op    | Result |\n|=======|========|\n"
            '| "x+y" | sum of |\n|       | x, y   |\n+-------+--------+\n\n'
            "For example:\n\n   with open(path) as f:\n       data = f.read()\n"
        )
        (passage,) = chunk(text)
        markdown = to_markdown(passage)
        assert '| "x+y" | sum of x, y |' in markdown
        assert "| Op | Result |" in markdown
        assert "```\nwith open(path) as f:\n    data = f.read()\n```" in markdown
        page = to_html(passage)
        assert "<th>Op</th>" in page
        assert "<td>sum of x, y</td>" in page
        assert "<pre><code>with open(path) as f:" in page
        assert "+---" not in markdown


class TestSourcesText:
    def test_pydoc_passages_open_with_the_topic_not_its_weighting(self) -> None:
        """A pydoc topic's first passage is its first paragraph, not its name repeated."""
        pydoc = corpora()["pydoc"]
        (first, *_) = pydoc.pieces(pydoc.documents["with"])
        assert first.text.startswith('The "with" statement is used to wrap the execution')

    def test_package_metadata_fields_are_read(self) -> None:
        """A distribution's summary and long description are its document's text."""
        pytest_doc = corpora()["packages"].documents["pytest"]
        assert pytest_doc.title.startswith("pytest ")
        assert "simple powerful testing with Python" in pytest_doc.text
        assert "The ``pytest`` framework makes it easy" in pytest_doc.text

    def test_package_passages_are_headed_by_its_summary(self) -> None:
        """Every passage of a README is about what the distribution's summary says."""
        packages = corpora()["packages"]
        passages = packages.read("pytest", parse_query("fixtures"), 3)
        assert passages
        assert {p["section"] for p in passages} == {"pytest: simple powerful testing with Python"}


class TestDefinitions:
    def test_a_function_keeps_its_own_docstring_not_its_private_neighbours(self) -> None:
        """`functools.cache`'s docstring is in single quotes, and a private function with
        a docstring follows it: the entry is "cache Simple lightweight ...", not the
        private function's first line."""
        source = (
            "def cache(user_function, /):\n"
            "    'Simple lightweight unbounded cache.'\n"
            "    return user_function\n\n"
            "def _c3_merge(sequences):\n"
            '    """Merges MROs."""\n'
        )
        assert list(StdlibCorpus._definitions(source)) == [
            "cache Simple lightweight unbounded cache."
        ]


class TestCompoundNames:
    def test_name_run_together_is_cut_into_known_words(self) -> None:
        """ "findall" is find + all and "readline" read + line; prose-less cuts are not made."""
        compounds = Compounds({"find", "read", "line", "start", "with"})
        assert compounds.terms("findall") == ("find",)  # "all" is a function word
        assert compounds.terms("readline") == ("read", "line")
        assert compounds.terms("startswith") == ("start", "with")
        assert compounds.terms("fnmatch") == ()  # "fn" is too short to be a word
        assert compounds.terms("glob") == ()

    def test_find_all_matches_finds_re(self) -> None:
        """ "find all matches of a regular expression" is answered from `re` (its findall)."""
        found = report("How do I find all matches of a regular expression in a string?")
        ids = [f.content["id"] for f in found.findings[:3]]
        assert any(i == "stdlib:re" or i.startswith("stdlib:re.") for i in ids), ids


class TestEvalSet:
    def test_questions_are_distinct_and_cite_real_documents(self) -> None:
        """Each of the eval's questions is asked once and cites documents the sources have
        (a documentation page, `docs:<page>`, where the machine has the pages)."""
        development, held_out = load_questions(), load_questions(TEST_QUESTIONS)
        second = load_questions(HOLDOUT2_QUESTIONS)
        third = load_questions(HOLDOUT3_QUESTIONS)
        fourth = load_questions(HOLDOUT4_QUESTIONS)
        fifth = load_questions(HOLDOUT5_QUESTIONS)
        sixth = load_questions(HOLDOUT6_QUESTIONS)
        seventh = load_questions(HOLDOUT7_QUESTIONS)
        eighth = load_questions(HOLDOUT8_QUESTIONS)
        assert len(development) >= 70
        assert len(held_out) >= 60
        assert len(second) == 40
        assert len(third) == 50
        assert len(fourth) == 50
        assert len(fifth) == 50
        assert len(sixth) == 50
        assert len(seventh) == 50
        assert len(eighth) == 50
        asked = [
            q.question
            for q in (
                *development,
                *held_out,
                *second,
                *third,
                *fourth,
                *fifth,
                *sixth,
                *seventh,
                *eighth,
            )
        ]
        assert len(set(asked)) == len(asked)  # no test question is tuned on
        # Nor one asked in nearly the same words.
        for question in development:
            for other in (*held_out, *second, *third, *fourth, *fifth, *sixth, *seventh, *eighth):
                near = difflib.SequenceMatcher(
                    None, question.question.lower(), other.question.lower()
                )
                # quick_ratio() bounds ratio() from above, at a fraction of its cost.
                assert near.quick_ratio() <= NEAR or near.ratio() <= NEAR, question.question
        known = {f"{name}:{doc}" for name, corpus in corpora().items() for doc in corpus.documents}
        root = documentation_root()
        for expected in (
            *development,
            *held_out,
            *second,
            *third,
            *fourth,
            *fifth,
            *sixth,
            *seventh,
            *eighth,
        ):
            for cite in expected.cite:
                if cite.startswith("docs:"):
                    page = cite.removeprefix("docs:")
                    assert page.split("/")[0] in PARTS, expected
                    assert root is None or (root / f"{page}.rst.txt").is_file(), expected
                else:  # or a module the documentation names, `os.path` of `os`
                    assert cite in known or cite.rpartition(".")[0] in known, expected

    def test_the_test_set_is_varied(self) -> None:
        """The held-out set has questions with no answer, error messages and packages."""
        held_out = load_questions(TEST_QUESTIONS)
        assert sum(not q.cite for q in held_out) >= 5
        assert sum("Error" in q.question for q in held_out) >= 5
        assert sum(any(c.startswith("packages:") for c in q.cite) for q in held_out) >= 5

    def test_sets_option_chooses_by_short_name_and_refuses_a_typo(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`--sets dev` evaluates the development set alone, while tuning; a misspelt name
        stops before any research, saying which names there are."""
        assert [name for name, _, _ in parse_sets("holdout5, holdout3, dev")] == [
            "dev",
            "holdout3",
            "holdout5",
        ]
        assert [name for name, _, _ in SETS] == [
            "dev",
            "test",
            "holdout2",
            "holdout3",
            "holdout4",
            "holdout5",
            "holdout6",
            "holdout7",
            "holdout8",
        ]
        with pytest.raises(SystemExit) as stopped:
            main(["--sets", "dev,holdot3"])
        assert stopped.value.code == 2
        error = capsys.readouterr().err
        assert "'holdot3'" in error
        assert "dev,test,holdout2,holdout3,holdout4,holdout5,holdout6,holdout7,holdout8" in error

    def test_held_out_sets_are_summed_when_more_than_one_is_evaluated(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each held-out set is small; with two or more nobody tuned on evaluated, their
        sum is printed too (never the development set's questions, nor a held-out set's
        whose misses were read while tuning). No research here: each question's score
        is made up from its position."""
        from examples.research_agent.eval import __main__ as evaluation

        def made_up(questions: list[Expected], corpora: object) -> list[Score]:
            ranks = (2, 7, None)
            return [Score(q, ranks[n % 3], n % 2, 4, ()) for n, q in enumerate(questions)]

        async def evaluate(
            questions: list[Expected], corpora: object, openings: object = None
        ) -> list[Score]:
            return made_up(questions, corpora)

        monkeypatch.setattr(evaluation, "_evaluate", evaluate)
        monkeypatch.setattr(evaluation.Openings, "load", lambda *args: None)
        # Not structlog's global configuration: it would outlive this test (and write to
        # this test's captured stderr after it is closed).
        monkeypatch.setattr(evaluation, "configure_logging", lambda level: None)
        monkeypatch.setattr(evaluation, "load_corpus", lambda name: None)
        main(["--sets", "dev,test,holdout4,holdout6,holdout7"])
        printed = capsys.readouterr().out
        assert "== test set (held out) (its figures gated every change)" in printed
        assert "== fourth held-out set (its misses read while tuning" in printed
        together = printed.split(
            "== the held-out sets nobody tuned on together: holdout6, holdout7\n"
        )
        assert len(together) == 2
        pooled = made_up(load_questions(HOLDOUT6_QUESTIONS), None)
        pooled += made_up(load_questions(HOLDOUT7_QUESTIONS), None)
        assert together[1].splitlines()[:-1] == summary(pooled)
        main(["--sets", "dev,test,holdout4,holdout6"])  # one set nobody tuned on: no sum
        assert "together" not in capsys.readouterr().out


class TestRelevanceFloor:
    """A search whose best passage has less than half of the query's weight keeps the
    passages that come closest, never those below `LOWEST`."""

    @staticmethod
    def passage(text: str) -> Passage:
        return Passage(
            source="stdlib", id="stdlib:m", document="m", section="", text=text, score=1.0
        )

    def test_floor_is_lowered_to_the_best_passage_found(self) -> None:
        # Four words of equal weight: the best passage has two of them (half).
        scorer = Scorer(Counter({"alpha": 1, "beta": 1, "gamma": 1, "delta": 1}), 10)
        query = "alpha beta gamma delta"
        assert scorer.floor(query, [self.passage("alpha beta gamma")]) == FLOOR
        assert scorer.floor(query, [self.passage("alpha")]) == LOWEST
        lowered = scorer.floor(query, [self.passage("alpha beta"), self.passage("alpha")])
        assert LOWEST < lowered < FLOOR

    def test_analysis_keeps_the_closest_passages_when_none_has_half(self) -> None:
        scorer = Scorer(Counter({"alpha": 1, "beta": 1, "gamma": 1, "delta": 1}), 10)
        found = [self.passage("alpha beta unrelated"), self.passage("alpha only")]
        kept = relevant(scorer, "alpha beta gamma delta zeta", found, keep=4)
        assert [p["text"] for p in kept] == ["alpha beta unrelated"]


class TestNamed:
    def test_a_heading_with_only_a_common_question_word_is_not_about_the_question(self) -> None:
        """ "function" is in most documents, "memoize" in one: a heading that says
        "Functions" does not make a passage about memoizing a function."""
        scorer = Scorer(Counter({"function": 500, "memoiz": 1, "result": 50}), 1000)
        question = "memoize function results"
        generic = Passage(
            source="docs",
            id="docs:library/x#x",
            document="x",
            section="Functions",
            text="",
            score=1,
        )
        about = Passage(
            source="docs", id="docs:library/x#y", document="x", section="Memoize", text="", score=1
        )
        assert not scorer.named(question, generic)
        assert scorer.named(question, about)

    def test_a_passage_named_after_a_question_word_is_about_it(self) -> None:
        """`pydoc:with` is about "the with statement", though "with" is a common word."""
        scorer = Scorer(Counter({"with": 500, "statement": 300, "context": 5}), 1000)
        topic = Passage(source="pydoc", id="pydoc:with", document="w", section="", text="", score=1)
        assert scorer.named("with statement context", topic)


class TestPackageDiscount:
    def test_a_package_whose_summary_has_a_key_word_is_not_discounted(self) -> None:
        # No word vectors: the two headings' meaning would differ too; words only, here.
        scorer = Scorer(Counter({"retri": 3, "call": 400, "function": 500}), 1000)
        question = "retry a function call"
        about = Passage(
            source="packages",
            id="packages:tenacity",
            document="tenacity 9.0",
            section="Retry code until it succeeds",
            text="A retrying library for a function call.",
            score=1,
        )
        aside = Passage(**{**about, "section": "An HTTP client"})
        assert scorer.relevance(question, about) > scorer.relevance(question, aside)
        assert scorer.relevance(question, aside) == pytest.approx(
            SOURCE_WEIGHTS["packages"] * scorer.relevance(question, about), rel=0.01
        )


class TestDiversity:
    def test_a_second_passage_of_one_section_ranks_below_another_section(self) -> None:
        """Two passages of one section, then a slightly less relevant one of another
        page: the other page's passage is listed second."""

        def finding(id_: str, text: str, relevance: float) -> Finding:
            content = {"source": "docs", "id": id_, "section": "s", "text": text}
            return Finding("t", "docs", "q", {**content, "relevance": relevance})

        first = finding("docs:library/a#x", "one", 0.8)
        again = finding("docs:library/a#x", "two", 0.78)
        other = finding("docs:library/b#y", "three", 0.6)
        assert _diversified([first, again, other]) == [first, other, again]
