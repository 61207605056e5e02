"""Resume: a run that went partly wrong, then `--resume RUN_ID` with nothing injected.

The first run checkpoints into a temporary file while stdlib times out on half its
calls (seed 3: three subtopics recovered, one `partial` with some documents read and some
not) and packages refuses every connection (all `gap`); pydoc works. The resume, given
only the run id, reruns the same plan: what was read is read back from the checkpoints,
and only what is missing is searched.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from examples.research_agent.options import DEFAULT_CHECKPOINTS
from tests.e2e.conftest import QUESTION, Run, answered, run_agent

SOURCES = ("pydoc", "stdlib", "packages")
FAULTS = ("--inject", "stdlib=timeout@0.5", "--inject", "packages=unavailable")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resume") / "checkpoints.sqlite"


@pytest.fixture(scope="module")
def first(checkpoints: Path) -> Run:
    return run_agent(
        *(QUESTION, "--json", "--seed", "3", "--checkpoints", str(checkpoints)), *FAULTS
    )


@pytest.fixture(scope="module")
def run_id(first: Run) -> str:
    """The run id as a person reads it: from the line that says how to resume."""
    match = re.search(r"resume it with: --resume (\S+)", first.stderr)
    assert match, first.stderr
    return match.group(1)


@pytest.fixture(scope="module")
def resumed(first: Run, run_id: str, checkpoints: Path) -> Run:
    return run_agent("--resume", run_id, "--json", "--checkpoints", str(checkpoints))


def _entries(run: Run) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["topic"], e["source"]): e for e in run.report["coverage"]}


class TestFirstRun:
    def test_prints_the_run_id_before_it_searches(self, first: Run, run_id: str) -> None:
        """The run id and the checkpoint file come first on stderr, then the work."""
        assert first.returncode == 0, first.stderr
        lines = first.stderr.splitlines()
        assert f"run {run_id}: checkpoints in " in lines[0]
        assert lines[0].endswith("checkpoints.sqlite")
        assert f"resume it with: --resume {run_id}" in lines[1]
        assert first.report["runId"] == run_id
        assert first.report["resumed"] is False

    def test_leaves_partial_and_gap_entries(self, first: Run) -> None:
        """stdlib: answered and partial; packages: every subtopic a gap; pydoc intact.
        (Answered: covered, or partial and unsure its passages answer, which no rerun
        changes.)"""
        assert all(answered(e) for e in first.coverage("pydoc"))
        assert {e["status"] for e in first.coverage("packages")} == {"gap"}
        assert sorted(answered(e) for e in first.coverage("stdlib")) == [False, True, True, True]
        (partial,) = [e for e in first.coverage("stdlib") if e.get("partial")]
        assert partial["partial"]["completed"]
        assert partial["partial"]["pending"]


class TestResume:
    def test_reruns_the_same_plan_and_covers_everything(self, first: Run, resumed: Run) -> None:
        """Same run id, question and plan, nothing injected: every entry is answered.

        pydoc and stdlib always hold passages for this question; what `packages` finds
        depends on what is installed, so an entry there may honestly be empty.
        """
        assert resumed.returncode == 0, resumed.stderr
        report = resumed.report
        assert report["runId"] == first.report["runId"]
        assert report["resumed"] is True
        assert report["question"] == QUESTION
        assert report["plan"] == first.report["plan"]
        assert report["faults"] == []
        for entry in report["coverage"]:
            assert answered(entry) or entry["status"] == "empty", entry
            assert answered(entry) or entry["source"] == "packages", entry
        assert {e["source"] for e in report["coverage"]} == set(SOURCES)

    def test_searches_only_what_the_first_run_did_not_finish(
        self, first: Run, resumed: Run, as_json: Run
    ) -> None:
        """The report's tool-call counts: nothing for pydoc, only the unread documents of
        stdlib's partial entry, and a fresh search (as in a clean run) of every gap."""
        calls = resumed.report["toolCalls"]
        assert calls["pydoc"] == 0
        unread = sum(len(e["partial"]["pending"]) for e in first.coverage("stdlib") if e["partial"])
        assert calls["stdlib"] == unread >= 1
        assert (
            calls["packages"]
            == as_json.report["toolCalls"]["packages"]
            >= len(first.report["plan"])
        )
        assert (
            f"tool calls: pydoc 0, stdlib {unread}, packages {calls['packages']}" in resumed.stderr
        )

    def test_progress_shows_what_each_search_restored(self, first: Run, resumed: Run) -> None:
        """Each entry that had progress says so; a gap had none and starts over."""
        for (topic, source), entry in _entries(first).items():
            restored = re.search(
                rf"^\[[ \d.]+s\] {re.escape(topic)} × {source}: resumed: (\d+) documents "
                r"read before, (\d+) to read$",
                resumed.stderr,
                re.MULTILINE,
            )
            if entry["status"] == "gap":
                assert restored is None
            elif entry.get("partial"):
                assert restored, (topic, source)
                assert restored.groups() == (
                    str(len(entry["partial"]["completed"])),
                    str(len(entry["partial"]["pending"])),
                )
            else:
                assert restored, (topic, source)
                assert restored.group(2) == "0"

    def test_restored_findings_are_the_first_runs(self, first: Run, resumed: Run) -> None:
        """Read back from the checkpoints, pydoc's passages are exactly those found first."""
        assert resumed.findings("pydoc") == first.findings("pydoc")
        assert resumed.findings("packages")
        assert not [f for f in resumed.report["findings"] if f["preliminary"]]


class TestResumeBadInput:
    def test_unknown_run_id(self, first: Run, checkpoints: Path) -> None:
        """A run id the checkpoint file does not have: one line, exit code 2."""
        run = run_agent("--resume", "no-such-run", "--checkpoints", str(checkpoints))
        assert run.returncode == 2
        assert run.stdout == ""
        assert run.stderr.splitlines() == [
            "python -m examples.research_agent: error: --resume no-such-run: "
            f"no run no-such-run in {checkpoints}"
        ]

    @pytest.mark.parametrize(
        ("args", "says"),
        [
            (("--resume", "abc", "--checkpoints", "missing.sqlite"), "no checkpoint file"),
            ((QUESTION, "--resume", "abc"), "drop QUESTION"),
            (("--resume", "abc", "--sources", "pydoc"), "drop --sources"),
            ((), "a question is needed (or --resume RUN_ID)"),
        ],
        ids=["no checkpoint file", "with a question", "with sources", "neither"],
    )
    def test_one_line_exit_two(self, args: tuple[str, ...], says: str) -> None:
        """A resume that cannot start is one line naming the problem, and exit code 2."""
        run = run_agent(*args)
        assert run.returncode == 2
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1, run.stderr
        assert says in lines[0]


class TestCheckpointsBadPath:
    def test_a_checkpoint_path_under_a_file_is_one_line_exit_two(self, tmp_path: Path) -> None:
        """`--checkpoints` under a file: one line naming the path and the file, exit code 2."""
        blocker = tmp_path / "notes.txt"
        blocker.write_text("my notes\n")
        path = blocker / "checkpoints.sqlite"
        run = run_agent(QUESTION, "--checkpoints", str(path))
        assert run.returncode == 2
        assert run.stdout == ""
        assert run.stderr.splitlines() == [
            f"python -m examples.research_agent: error: --checkpoints {path}: cannot create "
            f"the directory {blocker} of checkpoint store {path}: "
            f"{blocker} is a file, not a directory"
        ]


class TestDefaultCheckpoints:
    def test_in_the_user_cache_directory(self, markdown: Run) -> None:
        """Without --checkpoints, a run checkpoints in the user's cache directory (XDG on
        Linux), never in the folder it is run from."""
        first = markdown.stderr.splitlines()[0]
        where = first.split("checkpoints in ", 1)[1]
        assert where.endswith("/cache/agentmesh/research_agent/checkpoints.sqlite")
        assert Path(where).is_absolute()
        assert DEFAULT_CHECKPOINTS.parts[-3:] == (
            "agentmesh",
            "research_agent",
            "checkpoints.sqlite",
        )
