"""The research agent's saved indexes: built once, read back the same, rebuilt when they
cannot be read or no longer match what they were built from."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from examples.research_agent.index_cache import IndexCache, Loaded, Origin
from examples.research_agent.passage_cache import PassageCache, SavedPassage
from examples.research_agent.ranking import BM25Index, parse_query
from examples.research_agent.sources import Document, PydocCorpus, load_corpus

from .conftest import QUESTION, run_agent
from .test_docs_source import ATEXIT


def report_body(markdown: str) -> list[str]:
    """The report without its line naming the run (its id differs from run to run)."""
    return [line for line in markdown.splitlines() if not line.startswith("*run ")]


def saved(cache: IndexCache, name: str) -> Path:
    (place,) = cache.directory.glob(f"{name}-*")
    return place


class TestIndexCache:
    def test_built_once_then_read_back_the_same(self, tmp_path: Path) -> None:
        """The first load builds and saves; the next reads it back, and it ranks the same."""
        cache = IndexCache(tmp_path)
        first, second = cache.load("pydoc"), cache.load("pydoc")
        assert (first.origin, second.origin) == (Origin.BUILT, Origin.CACHE)
        query = parse_query("with statement context manager exceptions")
        built = load_corpus("pydoc")
        assert second.corpus.find(query, 5) == built.find(query, 5)
        assert second.corpus.read("with", query, 3) == built.read("with", query, 3)
        assert second.corpus.document_frequencies() == built.document_frequencies()

    def test_stdlib_read_back_reads_python_and_c_modules(self, tmp_path: Path) -> None:
        """A saved stdlib index reads modules from source (`_pydecimal.py`) and C (`math`)."""
        cache = IndexCache(tmp_path)
        built = cache.load("stdlib").corpus
        restored = cache.load("stdlib")
        assert restored.origin is Origin.CACHE
        for module, words in (("decimal", "decimal context rounding"), ("math", "isclose")):
            query = parse_query(words)
            assert restored.corpus.find(query, 5) == built.find(query, 5)
            assert restored.corpus.read(module, query, 3) == built.read(module, query, 3)
            assert restored.corpus.read(module, query, 3)

    @pytest.mark.parametrize("damaged", ["corpus.json", "documents/frequencies.json"])
    def test_corrupt_cache_is_rebuilt(self, tmp_path: Path, damaged: str) -> None:
        """A corrupt saved index is rebuilt, with the reason, and saved again whole."""
        cache = IndexCache(tmp_path)
        cache.load("pydoc")
        (saved(cache, "pydoc") / damaged).write_bytes(b"\x00{not json")
        rebuilt = cache.load("pydoc")
        assert rebuilt.origin is Origin.REBUILT
        assert "unreadable" in rebuilt.reason
        assert "rebuilt" in rebuilt.describe()
        assert rebuilt.corpus.find(parse_query("with statement"), 3)
        assert cache.load("pydoc").origin is Origin.CACHE

    def test_truncated_arrays_are_rebuilt(self, tmp_path: Path) -> None:
        """A half-written NumPy file (a crash, a full disk) is unreadable: rebuilt."""
        cache = IndexCache(tmp_path)
        cache.load("pydoc")
        (array,) = (saved(cache, "pydoc") / "documents").glob("data*.npy")
        array.write_bytes(array.read_bytes()[:100])
        assert cache.load("pydoc").origin is Origin.REBUILT

    def test_new_key_when_the_source_changes(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Another fingerprint (say another pydoc topics file) builds anew; the old goes."""
        cache = IndexCache(tmp_path)
        cache.load("pydoc")
        before = saved(cache, "pydoc")
        monkeypatch.setattr(PydocCorpus, "fingerprint", classmethod(lambda cls: "changed"))
        assert cache.load("pydoc").origin is Origin.BUILT
        assert saved(cache, "pydoc") != before
        assert not before.exists()

    def test_unwritable_cache_still_gives_the_index(self, tmp_path: Path) -> None:
        """A cache directory that cannot be made: the index is built, used and not saved."""
        blocker = tmp_path / "file"
        blocker.write_text("not a directory", encoding="utf-8")
        loaded: Loaded = IndexCache(blocker / "indexes").load("pydoc")
        assert loaded.origin is Origin.BUILT
        assert loaded.not_saved
        assert "not cached" in loaded.describe()
        assert loaded.corpus.find(parse_query("with statement"), 3)


def never(self: object, doc: Document) -> Iterator[object]:
    raise AssertionError(f"{doc.id} was split into passages again")


class TestSavedPassages:
    """What a search derives from a document it reads (its passages and their BM25
    index) is saved with the source's index: the next run reads it back."""

    def test_a_read_document_is_read_back_not_split_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        query = parse_query("with statement context manager exceptions")
        first = IndexCache(tmp_path).load("pydoc").corpus.read("with", query, 3)
        assert first == load_corpus("pydoc").read("with", query, 3)
        monkeypatch.setattr(PydocCorpus, "pieces", never)
        again = IndexCache(tmp_path).load("pydoc")
        assert again.origin is Origin.CACHE
        assert again.corpus.read("with", query, 3) == first

    def test_a_changed_page_is_split_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Passages read back are those of the file as it is now, never as it was."""
        page = tmp_path / "docs" / "library" / "atexit.rst.txt"
        page.parent.mkdir(parents=True)
        page.write_text(ATEXIT, encoding="utf-8")
        monkeypatch.setenv("RESEARCH_AGENT_DOCS", str(tmp_path / "docs"))
        cache = IndexCache(tmp_path / "cache")
        query = parse_query("register function termination")
        before = cache.load("docs").corpus.read("library/atexit", query, 3)
        assert "executed at termination" in before[0]["text"]
        running = cache.load("docs").corpus  # read back, as a run that is going on
        page.write_text(ATEXIT.replace("executed at", "run at exit, at"), encoding="utf-8")
        after = running.read("library/atexit", query, 3)
        assert "run at exit, at termination" in after[0]["text"]
        assert not any("executed at" in p["text"] for p in after)
        # The index knows the page changed too: the next run builds it again.
        assert cache.load("docs").origin is Origin.BUILT

    def test_an_unreadable_saved_document_is_made_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        query = parse_query("with statement")
        first = IndexCache(tmp_path).load("pydoc").corpus.read("with", query, 3)
        (meta,) = saved(IndexCache(tmp_path), "pydoc").glob("passages/*/passages.json")
        meta.write_text("{", encoding="utf-8")
        assert IndexCache(tmp_path).load("pydoc").corpus.read("with", query, 3) == first
        monkeypatch.setattr(PydocCorpus, "pieces", never)  # saved over, whole
        assert IndexCache(tmp_path).load("pydoc").corpus.read("with", query, 3) == first

    def test_a_document_that_cannot_be_saved_is_said_once(self, tmp_path: Path) -> None:
        """The search goes on unsaved; the first failure is logged, not every one."""
        index = BM25Index([["with"], ["statement"]])
        passages = [SavedPassage("s", "with", "", ""), SavedPassage("s", "statement", "", "")]
        cache = PassageCache(tmp_path / "removed" / "passages", "key")
        with capture_logs() as logs:
            assert cache.put("with", "", passages, index) is False
            assert cache.put("for", "", passages, index) is False
        assert [log["event"] for log in logs] == ["passages_unsaved"]
        assert logs[0]["log_level"] == "warning"
        assert str(tmp_path / "removed" / "passages") == logs[0]["directory"]

    def test_two_processes_saving_one_document_at_once_leave_it_whole(self, tmp_path: Path) -> None:
        """Each saves the same document many times from a barrier, reading it back after
        each save: every read finds it whole or not at all, and nothing else is left."""
        spawn = multiprocessing.get_context("spawn")
        barrier = spawn.Barrier(2)
        workers = [spawn.Process(target=save_often, args=(tmp_path, barrier)) for _ in "ab"]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert [w.exitcode for w in workers] == [0, 0]
        found = PassageCache(tmp_path, "key").get("doc", "stamp")
        assert found is not None
        assert found[0] == PASSAGES
        assert [p.name for p in tmp_path.iterdir()] == [
            PassageCache(tmp_path, "key")._place("doc", "stamp").name
        ]


PASSAGES = [SavedPassage(f"section {n}", f"text {n} of many words", "", "") for n in range(40)]


def save_often(directory: Path, barrier: Barrier) -> None:
    """One of the racing processes (spawned: a module-level function)."""
    cache = PassageCache(directory, "key")
    index = BM25Index([p.text.split() for p in PASSAGES])
    barrier.wait(30)
    for _ in range(20):
        assert cache.put("doc", "stamp", PASSAGES, index)
        # While the other replaces it, there may be none; never a part of one.
        found = cache.get("doc", "stamp")
        assert found is None or (found[0] == PASSAGES and len(found[1]) == len(PASSAGES))


class TestCommandLine:
    def test_corrupt_cache_rebuilt_without_a_traceback(self, tmp_path: Path) -> None:
        """A run over a corrupt cache says it rebuilt it, and answers as usual."""
        env = {"XDG_CACHE_HOME": str(tmp_path)}
        first = run_agent(QUESTION, "--seed", "1", "--sources", "pydoc", env=env)
        assert first.returncode == 0, first.stderr
        assert "indexed pydoc" in first.stderr
        (meta,) = tmp_path.glob("agentmesh/research_agent/indexes/pydoc-*/corpus.json")
        meta.write_text("{", encoding="utf-8")
        second = run_agent(QUESTION, "--seed", "1", "--sources", "pydoc", env=env)
        assert second.returncode == 0, second.stderr
        assert "Traceback" not in second.stderr
        assert "(rebuilt: the saved index" in second.stderr
        assert report_body(second.stdout) == report_body(first.stdout)
        third = run_agent(QUESTION, "--seed", "1", "--sources", "pydoc", env=env)
        assert "(from the index cache)" in third.stderr

    def test_no_cache_writes_no_index(self, tmp_path: Path) -> None:
        """`--no-cache` builds the indexes and saves none."""
        env = {"XDG_CACHE_HOME": str(tmp_path)}
        run = run_agent(QUESTION, "--sources", "pydoc", "--no-cache", env=env)
        assert run.returncode == 0, run.stderr
        assert not list(tmp_path.glob("agentmesh/research_agent/indexes/*"))
