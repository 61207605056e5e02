"""Deprecated: a person's answers are approvals now, in `agentmesh.approvals`.

Every name this module had still imports from here for one release, with a
`DeprecationWarning` that names what to use: `PendingDecision` is `PendingApproval`,
`HumanDecision` is `Approval`, `DecisionKind` is `ApprovalKind`, `AnsweredDecision` is
`AnsweredApproval`; `Approve`, `Reject` and `Edit` keep their names.
"""

import warnings
from typing import Any

from agentmesh import approvals

# Nothing to star-import: the names live in `agentmesh.approvals`; this module forwards them.
__all__: list[str] = []
_RENAMED = {
    "AnsweredDecision": "AnsweredApproval",
    "Approve": "Approve",
    "DecisionKind": "ApprovalKind",
    "Edit": "Edit",
    "HumanDecision": "Approval",
    "PendingDecision": "PendingApproval",
    "Reject": "Reject",
}


def __getattr__(name: str) -> Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"agentmesh.decisions.{name} is now agentmesh.approvals.{new} (a person's answer "
        f"is an approval); the old name goes in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(approvals, new)
