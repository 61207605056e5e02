"""`RetryPolicy` and `RetryBudget` as values."""

from __future__ import annotations

from typing import Any

import pytest

from agentmesh import RetryBudget, RetryPolicy, UsageError


class TestRetryPolicy:
    def test_backoff_cap_grows_exponentially_up_to_max_delay(self) -> None:
        """0.2, 0.4, 0.8, ... capped at max_delay."""
        policy = RetryPolicy(initial_delay=0.2, max_delay=1.0, multiplier=2)
        assert [policy.backoff_cap(n) for n in range(1, 6)] == [0.2, 0.4, 0.8, 1.0, 1.0]

    def test_equal_jitter_stays_in_the_upper_half(self) -> None:
        """Equal jitter waits between half the cap and the cap."""
        policy = RetryPolicy(initial_delay=1.0, max_delay=8.0, jitter="equal")
        for n in range(1, 5):
            cap = policy.backoff_cap(n)
            assert all(cap / 2 <= policy.backoff(n) <= cap for _ in range(50))

    def test_policies_are_frozen_values(self) -> None:
        """A policy can be shared safely because it cannot change."""
        policy = RetryPolicy()
        assert policy == RetryPolicy()
        with pytest.raises(AttributeError):
            policy.max_attempts = 10  # type: ignore[misc]

    @pytest.mark.parametrize(
        ("options", "argument"),
        [
            ({"max_attempts": 0}, "max_attempts"),
            ({"initial_delay": -1}, "initial_delay"),
            ({"max_delay": -1}, "max_delay"),
            ({"multiplier": 0.5}, "multiplier"),
            ({"jitter": "some"}, "jitter"),
            ({"timeout": 0}, "timeout"),
        ],
    )
    def test_bad_values_name_the_argument(self, options: dict[str, Any], argument: str) -> None:
        """Misconfiguration fails at definition with the argument's name."""
        with pytest.raises(UsageError, match=argument):
            RetryPolicy(**options)


class TestRetryBudget:
    def test_allows_reserve_plus_ratio_of_first_attempts(self) -> None:
        """100 first attempts at 20% with a reserve of 10 allow exactly 30 retries."""
        budget = RetryBudget(ratio=0.2, reserve=10)
        for _ in range(100):
            budget.record_first_attempt()
        granted = sum(budget.try_spend() for _ in range(50))
        assert granted == 30
        assert budget.retries == 30
        assert budget.denied == 20

    def test_bad_values_name_the_argument(self) -> None:
        """Negative ratios or reserves are refused."""
        with pytest.raises(UsageError, match="ratio"):
            RetryBudget(ratio=-0.1)
        with pytest.raises(UsageError, match="reserve"):
            RetryBudget(reserve=-1)
