"""Deprecated: a person's answers are approvals now, in `agentmesh.approvals`.

Every name this module had still imports from here for one release, with a
`DeprecationWarning` that names what to use: `PendingDecision` is `PendingApproval`,
`HumanDecision` is `Approval`, `DecisionKind` is `ApprovalKind`, `AnsweredDecision` is
`AnsweredApproval`; `Approve`, `Reject` and `Edit` keep their names.
"""

import functools

from agentmesh import approvals
from agentmesh._signatures import kept_for_one_release

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

__getattr__ = kept_for_one_release(
    __name__,
    {
        old: (
            f"is now agentmesh.approvals.{new} (a person's answer is an approval)",
            functools.partial(getattr, approvals, new),
        )
        for old, new in _RENAMED.items()
    },
)
