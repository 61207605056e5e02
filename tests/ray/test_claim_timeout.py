"""A model claim whose answer comes too late gives its ticket back (a local Ray instance).

The worker stops waiting after `_ACTOR_TIMEOUT`; the actor may still grant the claim. A
ticket granted to nobody would hold a slot of the model's window for the rest of the run.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from agentmesh.executors import RayExecutor, _ray_models
from agentmesh.executors._ray_models import ClusterModelHealth, ModelTerms, Outbox
from agentmesh.executors._ray_shipping import _by_value
from agentmesh.executors._ray_state import StateActor
from agentmesh.models import ScriptedModel

ONE_SLOT = (3, 30.0, 1, 1)  # one call in flight at a time: a leaked ticket blocks the next


class SlowToAnswer(StateActor):
    """The run-state actor, answering a model claim only after its caller gave up."""

    def model_claim(self, *args: Any) -> Any:
        time.sleep(0.3)
        return super().model_claim(*args)


class TestAClaimThatTimesOut:
    async def test_gives_its_ticket_back_and_the_next_claim_gets_the_slot(
        self, ray_executor: RayExecutor, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The claim raises `TimeoutError` in the task; the actor, which granted it the
        only slot after all, frees it, so the task's next claim is granted."""
        import ray

        _by_value(sys.modules[__name__])
        actor = ray.remote(SlowToAnswer).options(num_cpus=0).remote()
        model = ScriptedModel([], name="m")
        health = ClusterModelHealth(
            Outbox(actor, "run"), "run", "call", ModelTerms(ONE_SLOT, None, None)
        )
        monkeypatch.setattr(_ray_models, "_ACTOR_TIMEOUT", 0.05)

        with pytest.raises(TimeoutError):
            health.claim(model)

        monkeypatch.setattr(_ray_models, "_ACTOR_TIMEOUT", 30.0)
        try:
            assert isinstance(health.claim(model), int)  # leaked, the window would be full
        finally:
            ray.kill(actor)
