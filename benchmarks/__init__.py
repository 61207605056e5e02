"""Benchmarks of agentmesh, runnable as ``python -m benchmarks.<name>`` from the repo root."""
