"""`ModelHealth`'s rate gate: what an answer's `anthropic-ratelimit-*` headers admit."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from agentmesh.models import ModelHealth, ScriptedModel

NEEDS = {"requests": 1, "input-tokens": 100, "output-tokens": 50}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def headers(family: str, limit: int, remaining: int, full_in: float) -> dict[str, str]:
    reset = datetime.fromtimestamp(time.time() + full_in, UTC).isoformat()
    prefix = f"anthropic-ratelimit-{family}"
    return {
        f"{prefix}-limit": str(limit),
        f"{prefix}-remaining": str(remaining),
        f"{prefix}-reset": reset,
    }


MODEL = ScriptedModel([], name="claude")


class TestRateGate:
    def test_without_headers_every_call_is_admitted_and_nothing_is_estimated(self) -> None:
        health = ModelHealth()
        asked: list[bool] = []

        def needs() -> dict[str, int]:
            asked.append(True)
            return NEEDS

        assert all(health.admit_rates(MODEL, needs) is None for _ in range(100))
        assert asked == []

    def test_of_64_asking_at_once_only_those_that_fit_are_admitted(self) -> None:
        """10 requests left: 10 are taken, in one step each; the 54 others wait."""
        clock = Clock()
        health = ModelHealth(clock=clock)
        health.settle_rates(MODEL, headers("requests", 60, 10, full_in=50.0))

        claims = [health.admit_rates(MODEL, lambda: NEEDS) for _ in range(64)]

        admitted = [claim for claim in claims if isinstance(claim, dict)]
        waits = [claim for claim in claims if isinstance(claim, float)]
        assert len(admitted) == 10
        assert len(waits) == 54
        # The bucket refills at (60 - 10) / 50 s = 1 request a second.
        assert all(0.9 < wait <= 1.01 for wait in waits)

    def test_the_bucket_refills_at_the_rate_its_headers_imply(self) -> None:
        clock = Clock()
        health = ModelHealth(clock=clock)
        health.settle_rates(MODEL, headers("input-tokens", 1000, 0, full_in=10.0))

        assert isinstance(health.admit_rates(MODEL, lambda: NEEDS), float)
        clock.now += 1.0  # 100 tokens a second
        assert health.admit_rates(MODEL, lambda: NEEDS) == NEEDS

    def test_a_report_never_raises_what_calls_in_flight_already_took(self) -> None:
        """The server has not seen the calls admitted here yet: the smaller count holds."""
        clock = Clock()
        health = ModelHealth(clock=clock)
        health.settle_rates(MODEL, headers("requests", 5, 2, full_in=60.0))
        assert health.admit_rates(MODEL, lambda: NEEDS) == NEEDS
        assert health.admit_rates(MODEL, lambda: NEEDS) == NEEDS

        health.settle_rates(MODEL, headers("requests", 5, 2, full_in=60.0))

        assert isinstance(health.admit_rates(MODEL, lambda: NEEDS), float)

    def test_what_an_answer_did_not_spend_goes_back(self) -> None:
        clock = Clock()
        health = ModelHealth(clock=clock)
        health.settle_rates(MODEL, headers("output-tokens", 100, 50, full_in=60.0))
        assert health.admit_rates(MODEL, lambda: NEEDS) == NEEDS
        assert isinstance(health.admit_rates(MODEL, lambda: NEEDS), float)

        health.settle_rates(MODEL, {}, unspent={"output-tokens": 50})

        assert health.admit_rates(MODEL, lambda: NEEDS) == NEEDS

    def test_a_429_s_headers_close_it_until_the_refill(self) -> None:
        clock = Clock()
        health = ModelHealth(clock=clock)
        health.settle_rates(MODEL, headers("requests", 1, 0, full_in=30.0))

        wait = health.admit_rates(MODEL, lambda: NEEDS)

        assert isinstance(wait, float)
        assert 29 < wait <= 30
        clock.now += 30
        assert health.admit_rates(MODEL, lambda: NEEDS) == NEEDS

    def test_an_answer_read_late_does_not_make_the_bucket_refill_faster(self) -> None:
        """A busy loop reads an answer late, when its reset is nearer: that report implies
        a faster refill than the server's. The slowest rate measured holds."""
        clock = Clock()
        health = ModelHealth(clock=clock)
        health.settle_rates(MODEL, headers("input-tokens", 1000, 0, full_in=10.0))
        health.settle_rates(MODEL, headers("input-tokens", 1000, 0, full_in=2.0))

        clock.now += 0.5  # 50 tokens at the true 100 a second; 250 at the late report's 500
        assert isinstance(health.admit_rates(MODEL, lambda: NEEDS), float)
        clock.now += 0.5
        assert health.admit_rates(MODEL, lambda: NEEDS) == NEEDS

    def test_a_new_limit_is_measured_afresh(self) -> None:
        clock = Clock()
        health = ModelHealth(clock=clock)
        health.settle_rates(MODEL, headers("input-tokens", 1000, 0, full_in=10.0))
        health.settle_rates(MODEL, headers("input-tokens", 4000, 0, full_in=10.0))

        clock.now += 0.25  # the new tier refills 400 a second: 100 tokens in a quarter
        assert health.admit_rates(MODEL, lambda: NEEDS) == NEEDS
