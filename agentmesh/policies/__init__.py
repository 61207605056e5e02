"""Deterministic policies in the tool path: rules that hold 100% of the time.

A policy sees each tool call before it runs (`@pre_tool_use`, may deny it) and the outcome
of each attempt before anyone else does (`@post_tool_use`, may forbid a retry, escalate or
withhold a result). Whatever a model or a router would prefer, a denied call is never
run and a forbidden retry is never attempted. What a policy returns is a `Ruling` (the
type an outcome carries, defined in `agentmesh.envelope`).

`Ruling` was `Decision` here until issue 25; the old name still imports, with a
`DeprecationWarning`, for one release.
"""

from agentmesh._signatures import kept_for_one_release
from agentmesh.envelope import Ruling
from agentmesh.policies._builtins import deny_after_permission_error, escalate_on, forbid_retry
from agentmesh.policies._chain import PolicyChain
from agentmesh.policies._core import (
    Match,
    PostToolUse,
    PreToolUse,
    ToolCallEvent,
    ToolPolicy,
    ToolResultEvent,
    post_tool_use,
    pre_tool_use,
)

__all__ = [
    "Match",
    "PolicyChain",
    "PostToolUse",
    "PreToolUse",
    "Ruling",
    "ToolCallEvent",
    "ToolPolicy",
    "ToolResultEvent",
    "deny_after_permission_error",
    "escalate_on",
    "forbid_retry",
    "post_tool_use",
    "pre_tool_use",
]

__getattr__ = kept_for_one_release(
    __name__,
    {"Decision": ("is now Ruling (what a policy returns is a ruling)", lambda: Ruling)},
)
