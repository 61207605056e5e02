"""The research agent's saved indexes: built once, read back the same, rebuilt when they
cannot be read or no longer match what they were built from."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.research_agent.index_cache import IndexCache, Loaded, Origin
from examples.research_agent.ranking import parse_query
from examples.research_agent.sources import PydocCorpus, load_corpus

from .conftest import QUESTION, run_agent


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
