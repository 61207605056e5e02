"""Run the research agent as a user would: a subprocess from the repository root, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Python's documentation pages (the `docs` source) are left out of these runs: every run
# builds its indexes afresh in its own cache, and the pages take the longest to index.
# The source has its own tests (test_docs_source.py), on a few pages.
os.environ.setdefault("RESEARCH_AGENT_DOCS", "")
QUESTION = "How does the with statement handle exceptions in context managers?"


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
    """
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "PYTHONPATH": str(ROOT)}
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTMESH_MODEL"):
        environment.pop(name, None)
    environment.update(env or {})
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="research-agent-") as workdir:
        environment.setdefault("XDG_CACHE_HOME", str(Path(workdir) / "cache"))
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
