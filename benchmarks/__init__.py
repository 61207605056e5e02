"""Benchmarks of agentmesh: ``python -m benchmarks`` runs them all side by side.

Each module also runs alone (``python -m benchmarks.throttle_waiters``,
``python -m benchmarks.memory coordinator 100000``); none is part of the test run.
"""
