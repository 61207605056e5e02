"""Subagents: the spokes. `@subagent` for functions, `Subagent` for subclasses."""

from agentmesh.subagents._base import Subagent
from agentmesh.subagents._function import FunctionSubagent, subagent
from agentmesh.subagents._llm import REPORT_FAILURE, SUBMIT_RESULT, LLMSubagent
from agentmesh.subagents._options import SubagentKwargs, SubagentOptions
from agentmesh.subagents._tool_source import ToolSource

__all__ = [
    "REPORT_FAILURE",
    "SUBMIT_RESULT",
    "FunctionSubagent",
    "LLMSubagent",
    "Subagent",
    "SubagentKwargs",
    "SubagentOptions",
    "ToolSource",
    "subagent",
]
