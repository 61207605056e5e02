"""The outcome model: every run of a subagent or a tool ends in exactly one `Outcome`.

An `Outcome` is a `Success` (which may be a valid, empty result) or an `ErrorEnvelope`
that says what failed, why, what was tried, what was already found and what else could
work. Both are frozen pydantic models: snake_case in Python, camelCase on the wire
(`to_dict()` / `model_dump(by_alias=True)`), so the JSON matches the literature.
"""

from agentmesh._signatures import kept_for_one_release
from agentmesh.envelope._outcomes import (
    ErrorEnvelope,
    Outcome,
    Success,
    _is_empty_value,
)

# Shared with the rest of agentmesh (the events and the report carry rulings; the MCP
# bridge bounds partial results), not exported.
from agentmesh.envelope._ruling import CarriedRuling as CarriedRuling
from agentmesh.envelope._ruling import Ruling
from agentmesh.envelope._ruling import RulingAction as RulingAction
from agentmesh.envelope._wire import (
    MAX_PARTIAL_JSON_BYTES as MAX_PARTIAL_JSON_BYTES,
)
from agentmesh.envelope._wire import (
    ErrorCategory,
    ErrorType,
    PartialResults,
    RetryCount,
    ToolsLeftOut,
)

__all__ = [
    "ErrorCategory",
    "ErrorEnvelope",
    "ErrorType",
    "Outcome",
    "PartialResults",
    "RetryCount",
    "Ruling",
    "Success",
    "ToolsLeftOut",
]

__getattr__ = kept_for_one_release(
    __name__,
    {
        "is_empty_value": (
            "is internal to agentmesh (use Success.is_empty)",
            lambda: _is_empty_value,
        ),
        # Until issue 25 a policy returned a `Decision` and an outcome carried a
        # `PolicyVerdict`: one thing, two types; both are `Ruling` now.
        "PolicyVerdict": ("is now Ruling (a policy's ruling)", lambda: Ruling),
    },
)
