"""Subagents: the spokes. `@subagent` for functions, `Subagent` for subclasses."""

from agentmesh.subagents._base import Subagent
from agentmesh.subagents._function import FunctionSubagent, subagent

__all__ = ["FunctionSubagent", "Subagent", "subagent"]
