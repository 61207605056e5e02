"""Test doubles for agentmesh users: record backoff delays, inject failures, fake the API.

sleep = RecordingSleep()
policy = RetryPolicy(max_attempts=4, initial_delay=0.1, jitter="none", sleep=sleep)
...
assert sleep.delays == [0.1, 0.2, 0.4]

`FakeMessagesAPI` serves a scripted Anthropic Messages API on loopback for the real SDK;
the `fake_messages_api` pytest fixture (registered by agentmesh's pytest plugin) gives
each test a started one.
"""

from agentmesh.testing._fake_messages_api import FakeMessagesAPI, RecordedRequest, Reply
from agentmesh.testing._faults import FailTimes, RecordingSleep

__all__ = ["FailTimes", "FakeMessagesAPI", "RecordedRequest", "RecordingSleep", "Reply"]
