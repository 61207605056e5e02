"""The run-state actor's model health and usage meter, asked as workers ask it (no Ray needed).

Each method is what one actor call does; the actor runs one call at a time, so a claim
answered here is taken for the whole cluster.
"""

from __future__ import annotations

from agentmesh.envelope import ErrorCategory, ErrorEnvelope
from agentmesh.executors._ray_models import RunModels
from agentmesh.models import ModelPrice, PriceTable, UsageLimits

SETTINGS = (3, 30.0, 4, None)
KEY = "https://api.anthropic.com#claude-sonnet-4-5"
CALL = "dispatch-1"
PRICES = PriceTable({"m": ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.1)})


def overloaded() -> ErrorEnvelope:
    return ErrorEnvelope(
        error_category=ErrorCategory.TRANSIENT,
        error_type="overloaded",
        is_retryable=True,
        message="Overloaded",
        attempted_query="q",
        source="a/model",
        attempts=1,
    )


class TestModelClaims:
    def test_three_overloads_open_the_breaker_for_every_caller(self) -> None:
        """Tickets from any worker count alike: the third 529 takes the model out, and
        every later claim is told why, with when it may be probed."""
        models = RunModels()
        tickets = [models.claim(SETTINGS, KEY, CALL)[0] for _ in range(3)]
        views = [
            models.release(KEY, ticket, overloaded()) for ticket in tickets if type(ticket) is int
        ]

        assert len(views) == 3
        assert views[-1][0] == "open"
        assert views[-1][1] is not None  # out since
        claim, view = models.claim(SETTINGS, KEY, CALL)
        assert claim == "overloaded"
        assert view[3] is not None
        assert 0 < view[3] <= 30.0

    def test_the_window_is_claimed_slot_by_slot(self) -> None:
        """Four slots at first: the fifth claim waits (None), whoever asks."""
        models = RunModels()
        claims = [models.claim(SETTINGS, KEY, CALL)[0] for _ in range(5)]
        assert [isinstance(claim, int) for claim in claims] == [True] * 4 + [False]
        assert claims[4] is None

    def test_a_lost_task_s_slots_and_probe_are_given_back(self) -> None:
        """A worker killed mid-call never releases its tickets: the driver's word frees
        them, and a late release of a dropped ticket changes nothing."""
        models = RunModels()
        held = [models.claim(SETTINGS, KEY, "lost")[0] for _ in range(4)]
        assert models.claim(SETTINGS, KEY, CALL)[0] is None  # the window is full

        models.drop("lost")

        assert isinstance(models.claim(SETTINGS, KEY, CALL)[0], int)
        ticket = held[0]
        assert isinstance(ticket, int)
        models.release(KEY, ticket, overloaded())  # late: ignored, counts no overload
        assert models.view(KEY)[0] == "closed"

    def test_an_abandoned_claim_frees_its_own_ticket_only(self) -> None:
        """A worker that stopped waiting for its third claim names it: that ticket is
        free again, the others (in use) still held."""
        models = RunModels()
        for number in range(1, 5):
            models.claim(SETTINGS, KEY, CALL, number)
        assert models.claim(SETTINGS, KEY, "other")[0] is None  # the window is full

        models.abandon(CALL, 3)

        assert sorted(number for _, _, number in models.held.values()) == [1, 2, 4]
        assert isinstance(models.claim(SETTINGS, KEY, "other")[0], int)

    def test_a_model_without_rate_limit_headers_is_not_rate_limited(self) -> None:
        """The view says so: a worker then admits its calls without asking the actor."""
        _, view = RunModels().claim(SETTINGS, KEY, CALL)
        assert view[4] is False


class TestUsageAdmission:
    def test_max_model_calls_counts_every_worker_s_calls(self) -> None:
        models = RunModels()
        terms = (UsageLimits(max_model_calls=2), PRICES)
        answers = [models.admit(terms, "m", "a", None, None)[0] for _ in range(3)]
        assert answers[:2] == [0.0, 0.0]
        assert isinstance(answers[2], str)
        assert "max_model_calls=2" in answers[2]
        assert models.admit(terms, "m", "a", None, None)[1] == ("max_model_calls", answers[2])

    def test_a_hard_cap_holds_a_call_until_a_reservation_is_settled(self) -> None:
        """$0.01 of worst cases reserved under a $0.015 cap: the next one is held
        (None), then fits once the first settles at its actual cost."""
        models = RunModels()
        terms = (UsageLimits(max_cost_usd=0.015, hard=True), PRICES)
        first, _ = models.admit(terms, "m", "a", None, 0.01)
        assert first == 0.01
        held, stop = models.admit(terms, "m", "a", None, 0.01)
        assert held is None
        assert stop is None
        assert models.meter is not None
        models.meter.settle("m", "a", input_tokens=100, output_tokens=100, reserved=0.01)
        assert models.admit(terms, "m", "a", None, 0.01)[0] == 0.01
