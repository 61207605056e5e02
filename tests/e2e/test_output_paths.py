"""The research agent checks `--out`, `--html` and `--events` before it does any work.

A path it could not write was found after the whole run, as a traceback: now it is one
line and exit code 2 before the plan, as for any other bad input.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import QUESTION, Run, run_agent

FLAGS = ["--out", "--html", "--events"]


def refused_at_once(run: Run, flag: str) -> str:
    """The one line of a command refused before any work, naming `flag`."""
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    [line] = run.stderr.strip().splitlines()  # no plan, no progress: nothing ran
    assert line.startswith(f"python -m examples.research_agent: error: {flag} ")
    return line


class TestOutputPaths:
    @pytest.mark.parametrize("flag", FLAGS)
    def test_a_directory_is_refused_before_the_run(self, flag: str, tmp_path: Path) -> None:
        """A directory given as an output file: one line saying so, exit 2."""
        line = refused_at_once(run_agent(QUESTION, flag, str(tmp_path)), flag)
        assert "is a directory" in line

    @pytest.mark.parametrize("flag", FLAGS)
    def test_a_path_through_a_file_is_refused(self, flag: str, tmp_path: Path) -> None:
        """A path whose directory is a regular file cannot be written: one line, exit 2."""
        blocker = tmp_path / "notes.txt"
        blocker.write_text("keep me", encoding="utf-8")
        refused_at_once(run_agent(QUESTION, flag, str(blocker / "report.md")), flag)
        assert blocker.read_text(encoding="utf-8") == "keep me"

    def test_a_file_that_cannot_be_opened_for_writing_is_refused(self) -> None:
        """A place nobody may write (sysfs, even for root): `cannot be written`, exit 2."""
        target = Path("/sys/agentmesh-report.md")
        if not Path("/sys").is_dir():
            pytest.skip("no /sys on this system")
        line = refused_at_once(run_agent(QUESTION, "--out", str(target)), "--out")
        assert "cannot be written" in line

    def test_two_outputs_into_one_file_are_refused(self, tmp_path: Path) -> None:
        """`--out` and `--html` naming the same file would overwrite each other."""
        same = str(tmp_path / "report")
        line = refused_at_once(run_agent(QUESTION, "--out", same, "--html", same), "--html")
        assert "the same file as --out" in line

    def test_the_check_leaves_no_file_behind(self, tmp_path: Path) -> None:
        """A command refused later (an unknown run to resume) does not leave an empty file."""
        out = tmp_path / "report.md"
        run = run_agent(
            "--resume", "no-such-run", "--checkpoints", str(tmp_path / "c.sqlite"),
            "--out", str(out),
        )  # fmt: skip
        assert run.returncode == 2, run.stderr
        assert not out.exists()

    def test_an_existing_file_is_kept_until_the_report_replaces_it(self, tmp_path: Path) -> None:
        """Checking an existing output truncates nothing; the finished run then writes it."""
        out = tmp_path / "report.md"
        out.write_text("old report", encoding="utf-8")
        refused = run_agent(QUESTION, "--out", str(out), "--html", str(tmp_path))
        assert refused.returncode == 2
        assert out.read_text(encoding="utf-8") == "old report"
        done = run_agent(QUESTION, "--seed", "1", "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert out.read_text(encoding="utf-8").startswith("#")
