"""The support desk example after a person's answer: the desk prints what the person did."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_support_desk import desk, first, first_run

__all__ = ["first", "first_run"]  # the fixtures, shared with the desk's own tests


class TestAnswerInTheOutput:
    def test_an_approval_is_named_with_its_id_and_the_call_made(
        self, first: tuple[Path, str, str]
    ) -> None:
        """After --approve ID in a new process, the refund's line says a person approved it."""
        checkpoints, _, approval = first
        done = desk(checkpoints, "--approve", approval)
        assert done.returncode == 0, done.stderr
        assert (
            f'B-2: covered (approved by a person (approval {approval}): refund(order="B-2", '
            "amount=900))"
        ) in done.stdout
        assert "over the limit" not in done.stdout
