"""The support desk example: a refund over the limit waits for a person, then resumes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def desk(checkpoints: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "examples.support_desk", "--checkpoints", str(checkpoints), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """One first run for the module: its checkpoints, its output and the id of the
    approval it waits for."""
    checkpoints = tmp_path_factory.mktemp("first-run")
    done = desk(checkpoints)
    assert done.returncode == 0, done.stderr
    match = re.search(r"--approve ([0-9a-f]{12})", done.stdout)
    assert match is not None, done.stdout
    return checkpoints, done.stdout, match.group(1)


@pytest.fixture
def first(first_run: tuple[Path, str, str], tmp_path: Path) -> tuple[Path, str, str]:
    """A first run's checkpoints, copied: each test answers and resumes its own copy, as
    after a first run of its own (the run ended: its store file is closed)."""
    checkpoints, out, approval = first_run
    shutil.copytree(checkpoints, tmp_path, dirs_exist_ok=True)
    return tmp_path, out, approval


class TestSupportDesk:
    def test_the_first_run_prints_the_pending_refund_and_its_id(
        self, first: tuple[Path, str, str]
    ) -> None:
        """The small refunds are made; the big one waits, with its arguments and reason."""
        _, out, approval = first
        assert "refunded 40 on A-1" in out
        assert "refunded 120 on C-3" in out
        assert "refunded 900" not in out
        assert f"pending approval {approval}: refund(order='B-2', amount=900)" in out
        assert "over the limit of 250 (policy refund_limit)" in out

    def test_approve_resumes_and_makes_the_refund(self, first: tuple[Path, str, str]) -> None:
        """--approve ID goes on in a new process: the refund is made, nothing waits."""
        checkpoints, _, approval = first
        done = desk(checkpoints, "--approve", approval)
        assert done.returncode == 0, done.stderr
        assert "B-2: covered" in done.stdout
        assert "refunded 900 on B-2" in done.stdout
        assert "pending approval" not in done.stdout

    def test_reject_resumes_and_says_why(self, first: tuple[Path, str, str]) -> None:
        """--reject ID REASON: no refund, and the entry says a person rejected it and why."""
        checkpoints, _, approval = first
        done = desk(checkpoints, "--reject", approval, "a voucher was sent")
        assert done.returncode == 0, done.stderr
        assert "rejected by a person: a voucher was sent" in done.stdout
        assert "refunded 900" not in done.stdout

    def test_an_unknown_or_spent_id_is_one_line_exit_two(
        self, first: tuple[Path, str, str]
    ) -> None:
        """An approval id the desk does not know, or one already answered, is refused."""
        checkpoints, _, approval = first
        assert desk(checkpoints, "--approve", approval).returncode == 0
        for args in (("--approve", approval), ("--reject", "feedbeefcafe", "no")):
            done = desk(checkpoints, *args)
            assert done.returncode == 2
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr

    def test_an_answered_id_is_not_answered_again_but_the_run_goes_on(
        self, first: tuple[Path, str, str]
    ) -> None:
        """Answering again names the answer that won; --go-on ID resumes without answering."""
        checkpoints, _, approval = first
        assert desk(checkpoints, "--approve", approval).returncode == 0
        again = desk(checkpoints, "--reject", approval, "too late")
        assert again.returncode == 2
        assert "already answered: Approve() at" in again.stderr
        done = desk(checkpoints, "--go-on", approval)
        assert done.returncode == 0, done.stderr
        assert "B-2: covered" in done.stdout
        assert "pending approval" not in done.stdout
