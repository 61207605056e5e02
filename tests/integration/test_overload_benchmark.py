"""The overload section of `python -m benchmarks` holds the issue's figure (issue 26)."""

from __future__ import annotations

from benchmarks import overload


class TestOverloadBenchmark:
    def test_the_run_s_model_health_covers_48_of_50_where_the_naive_loop_covers_none(
        self,
    ) -> None:
        """One round: ours ≥ 48 of 50 covered with a handful of primary calls; naive 0."""
        rows = {row.name: row for row in overload.run(1)}
        ours = rows[overload.NAMES["shared"]]
        naive = rows[overload.NAMES["naive"]]
        assert ours.covered.median >= 48
        assert ours.primary_calls.median <= 10
        assert naive.covered.median < 48
        assert ours.concurrency  # the settled window of each model
