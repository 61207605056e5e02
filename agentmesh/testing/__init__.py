"""Test doubles for agentmesh users: record backoff delays, inject failures.

sleep = RecordingSleep()
policy = RetryPolicy(max_attempts=4, initial_delay=0.1, jitter="none", sleep=sleep)
...
assert sleep.delays == [0.1, 0.2, 0.4]
"""

from agentmesh.testing._faults import FailTimes, RecordingSleep

__all__ = ["FailTimes", "RecordingSleep"]
