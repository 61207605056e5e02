"""Exception groups as one failure: which leaf decides, and what the group's envelope keeps.

The rule (in `agentmesh.classify`'s docstring) ranks the leaves' categories; the
group's details list its leaves, and its `CallFailed` leaves bring their policy ruling
and partial results. The `Classifier` flattens the group and classifies each leaf.
"""

from __future__ import annotations

from agentmesh.classify._mappers import Mapper, describe
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, PartialResults, Ruling
from agentmesh.errors import AgentError, CallFailed

# Which leaf of an exception group decides when not all of them are retryable.
_STRICTNESS: dict[ErrorCategory, int] = {
    ErrorCategory.PERMISSION: 4,
    ErrorCategory.BUSINESS: 3,
    ErrorCategory.VALIDATION: 2,
    ErrorCategory.OTHER: 1,
    ErrorCategory.TRANSIENT: 0,
}
# A group's details list its leaves; a group of thousands must not make a huge envelope.
_MAX_LEAVES_LISTED = 50
_MAX_LEAF_TEXT = 300


def _is_group_mapping(found: tuple[type[BaseException], Mapper] | None) -> bool:
    """Whether a lookup found a mapper registered for an exception-group class itself."""
    return found is not None and issubclass(found[0], BaseExceptionGroup)


def _group_details(
    group: BaseExceptionGroup[BaseException],
    leaves: list[BaseException],
    errors: list[AgentError],
) -> str:
    listed = [
        f"[{number}] {error.category.value}/{error.error_type}: {_leaf_text(leaf)}"
        for number, (leaf, error) in enumerate(zip(leaves, errors, strict=True), start=1)
    ][:_MAX_LEAVES_LISTED]
    if len(leaves) > _MAX_LEAVES_LISTED:
        listed.append(f"and {len(leaves) - _MAX_LEAVES_LISTED} more")
    head = f"{type(group).__qualname__} {group.message!r} with {len(leaves)} failure(s)"
    return f"{head}: {'; '.join(listed)}"


def _leaf_text(leaf: BaseException) -> str:
    described = describe(leaf)
    if isinstance(leaf, CallFailed):
        described = f"{described} (at {leaf.envelope.source})"
    return described[:_MAX_LEAF_TEXT]


def _ruling(envelopes: list[ErrorEnvelope]) -> Ruling | None:
    """The policy ruling a group keeps from its leaves: an escalation first."""
    rulings = [e.policy for e in envelopes if e.policy is not None]
    escalations = [r for r in rulings if r.action == "escalate"]
    chosen = escalations or rulings
    return chosen[0] if chosen else None


def _merged(*blocks: PartialResults | None) -> PartialResults | None:
    """The leaves' partial results and the caller's, in order, as one block."""
    present = [block for block in blocks if block is not None]
    if not present:
        return None
    return PartialResults(
        completed=tuple(dict.fromkeys(n for b in present for n in b.completed)),
        pending=tuple(dict.fromkeys(n for b in present for n in b.pending)),
        findings=tuple(item for b in present for item in b.findings),
    )
