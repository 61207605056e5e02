"""Run the research agent as a user would: a subprocess from the repository root, offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Python's documentation pages (the `docs` source) are left out of these runs: they take
# the longest to index. The source has its own tests (test_docs_source.py), on a few pages.
os.environ.setdefault("RESEARCH_AGENT_DOCS", "")
# The sentence encoder reads each document a run finds the first time (`openings`): a
# second or two in each run's fresh cache. test_openings.py runs the example with it.
os.environ.setdefault("RESEARCH_AGENT_ENCODER", "off")
QUESTION = "How does the with statement handle exceptions in context managers?"
# Where the research agent keeps its indexes under a cache home (platformdirs on Linux).
INDEXES = Path("agentmesh", "research_agent", "indexes")


class _Prebuilt:
    """The default sources' indexes, built once a session by a run of the example itself
    (so under exactly the key later runs look for): each run in a cache of its own starts
    from a copy instead of building them again, half of an offline run. How indexes are
    built, saved and read back is test_index_cache's (runs given their own cache)."""

    home: Path | None = None  # where to build them; set by `prebuilt_indexes`
    built: Path | None = None

    @classmethod
    def indexes(cls) -> Path | None:
        """The built indexes, built by the first call; None outside the session fixture
        or if the building run failed (then each run builds its own, as it would)."""
        home, cls.home = cls.home, None  # one attempt
        if home is not None:
            warm_up = run_agent(QUESTION, "--seed", "1", env={"XDG_CACHE_HOME": str(home)})
            if warm_up.returncode == 0 and (home / INDEXES).is_dir():
                cls.built = home / INDEXES
        return cls.built


def answered(entry: dict[str, Any]) -> bool:
    """Covered, or partial because unsure its passages answer (not because it failed:
    a failure's partial entry carries what was read, `partial`)."""
    unsure = entry["status"] == "partial" and not entry.get("partial")
    return bool(entry["status"] == "covered" or unsure)


@dataclass(frozen=True)
class Run:
    """One finished run of the example: exit code, both streams, wall time."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @cached_property
    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data

    def coverage(self, source: str) -> list[dict[str, Any]]:
        return [entry for entry in self.report["coverage"] if entry["source"] == source]

    def records(self, source: str) -> list[dict[str, Any]]:
        return [record for record in self.report["records"] if record["subagent"] == source]

    @property
    def html(self) -> Path:
        """The `--html` page this run wrote."""
        return Path(self.args[self.args.index("--html") + 1])

    def findings(self, source: str, *, preliminary: bool = False) -> list[dict[str, Any]]:
        return [
            f
            for f in self.report["findings"]
            if f["content"]["source"] == source and f["preliminary"] == preliminary
        ]


def run_agent(*args: str, env: dict[str, str] | None = None) -> Run:
    """`python -m examples.research_agent ARGS`, stdin closed, output captured (not a TTY).

    Offline unless `env` sets ANTHROPIC_API_KEY, whatever the developer's shell has. It
    runs in an empty temporary directory (the repository on PYTHONPATH) that is also its
    user cache directory (XDG_CACHE_HOME), so the default checkpoint file goes there and
    never into the user's cache; a test that resumes a run passes `--checkpoints` itself.
    That cache starts with a copy of the session's prebuilt indexes (`_Prebuilt`); a
    test that sets XDG_CACHE_HOME in `env` gets its own cache, untouched.
    """
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "PYTHONPATH": str(ROOT)}
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTMESH_MODEL"):
        environment.pop(name, None)
    environment.update(env or {})
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="research-agent-") as workdir:
        if "XDG_CACHE_HOME" not in environment:
            environment["XDG_CACHE_HOME"] = str(Path(workdir) / "cache")
            indexes = _Prebuilt.indexes()
            if indexes is not None:
                shutil.copytree(indexes, Path(workdir, "cache", INDEXES))
        completed = subprocess.run(
            [sys.executable, "-m", "examples.research_agent", *args],
            cwd=workdir,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    return Run(
        args=args,
        returncode=completed.returncode,
        stdout=completed.stdout,
        stderr=completed.stderr,
        seconds=time.perf_counter() - started,
    )


@pytest.fixture(scope="session", autouse=True)
def prebuilt_indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A place for the session's prebuilt indexes; built only if a test runs the example."""
    _Prebuilt.home = tmp_path_factory.mktemp("index-cache")
    try:
        yield
    finally:
        _Prebuilt.home = _Prebuilt.built = None


# One run per scenario, shared by every test that reads it.


@pytest.fixture(scope="session")
def markdown() -> Run:
    return run_agent(QUESTION, "--seed", "1")


@pytest.fixture(scope="session")
def as_json() -> Run:
    return run_agent(QUESTION, "--seed", "1", "--json")


@pytest.fixture(scope="session")
def outage() -> Run:
    """A source that always times out and one that refuses us; pydoc is left alone."""
    return run_agent(
        *(QUESTION, "--json", "--seed", "1"),
        *("--inject", "stdlib=timeout", "--inject", "packages=permission"),
    )


@pytest.fixture(scope="session")
def mixed() -> Run:
    """Three kinds at once, one per source: each is routed on its own."""
    return run_agent(
        *(QUESTION, "--json", "--seed", "1"),
        *("--inject", "stdlib=rate_limit", "--inject", "packages=unavailable"),
        *("--inject", "pydoc=invalid"),
    )


@pytest.fixture(scope="session")
def flaky(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """stdlib times out on half its calls (seed 3: one subtopic ends partial), pydoc finds
    nothing, packages refuses us: every status but gap, also written as HTML."""
    page = tmp_path_factory.mktemp("html") / "report.html"
    return run_agent(
        *(QUESTION, "--json", "--seed", "3", "--html", str(page)),
        *("--inject", "stdlib=timeout@0.5", "--inject", "pydoc=empty"),
        *("--inject", "packages=permission"),
    )
