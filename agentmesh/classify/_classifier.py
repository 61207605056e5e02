"""The `Classifier`: exception -> `AgentError` -> `ErrorEnvelope` (see `agentmesh.classify`).

The registry and its lookup along the MRO, a group made one failure, and the envelope:
its retry-after hint checked and the credentials an exception's text may echo removed.
The mappings it starts with are in `_builtin` (the SDKs' are loaded here, on first
use), the group rule in `_groups`; strict mode (`_strict`) asks `is_programming_error`.
"""

from __future__ import annotations

import collections
import copy as _copy
import math
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from agentmesh._redaction import REDACTED, redact_text
from agentmesh.classify import _a2a as _classify_a2a
from agentmesh.classify import _google as _classify_google
from agentmesh.classify import _openai as _classify_openai
from agentmesh.classify import _sdk as _classify_sdk
from agentmesh.classify._builtin import _BUILTIN_MAPPERS, _unexpected
from agentmesh.classify._groups import (
    _STRICTNESS,
    _group_details,
    _is_group_mapping,
    _merged,
    _ruling,
)
from agentmesh.classify._mappers import Mapper, describe
from agentmesh.classify._strict import PROGRAMMING_ERRORS
from agentmesh.envelope import ErrorEnvelope, ErrorType, PartialResults
from agentmesh.errors import AgentError, CallFailed, UsageError

__all__ = ["Classifier", "classify", "default_classifier"]

E = TypeVar("E", bound=BaseException)


# The same marker and key shape as the log redaction, so a secret reads the same everywhere.
_API_KEY = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]+|(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{20,}|(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"
)
_SECRET_HEADERS = ("x-api-key", "x-goog-api-key", "authorization")


class Classifier:
    """exception -> AgentError -> ErrorEnvelope; extensible registry.

    A new classifier starts with the built-in mappings (see the module docstring).
    """

    def __init__(self) -> None:
        self._mappers: dict[type[BaseException], Mapper] = dict(_BUILTIN_MAPPERS)

    def register(self, exc_type: type[E], mapper: Callable[[E], AgentError]) -> None:
        """Map `exc_type` (and its subclasses) into our vocabulary.

        Args:
            exc_type: the exception class to map; a more specific registered class in an
                exception's MRO still wins over it.
            mapper: builds the `AgentError` for an instance; replaces any earlier mapping
                of `exc_type`, built-in ones included.
        """
        if not (isinstance(exc_type, type) and issubclass(exc_type, BaseException)):
            raise UsageError(f"exc_type must be an exception class, got {exc_type!r}")
        if not callable(mapper):
            raise UsageError(f"mapper must be callable, got {mapper!r}")
        self._mappers[exc_type] = mapper

    def copy(self) -> Classifier:
        """An independent classifier with the same mappings, to register more without sharing."""
        clone = _copy.copy(self)
        clone._mappers = dict(self._mappers)
        return clone

    def to_agent_error(self, exc: BaseException) -> AgentError:
        """The `AgentError` that describes `exc`. Never raises, even if a mapper does."""
        found = self._lookup(exc)
        if isinstance(exc, BaseExceptionGroup) and not _is_group_mapping(found):
            return self._group_error(exc)
        if found is None:
            return _unexpected(exc)
        klass, mapper = found
        # A broken mapper must not turn one failure into a crash of the error path.
        try:
            error = mapper(exc)
        except Exception as failure:
            problem = f"raised {describe(failure)}"
        else:
            if isinstance(error, AgentError):
                return error
            problem = f"returned {type(error).__qualname__}, not an AgentError"
        fallback = _unexpected(exc)
        fallback.details = f"{fallback.details} (the mapper for {klass.__qualname__} {problem})"
        return fallback

    def is_programming_error(self, exc: BaseException) -> bool:
        """Whether `exc` is a bug strict mode re-raises: one of `PROGRAMMING_ERRORS` that
        no mapping of this classifier claims (a user's registration wins), or a group
        holding one."""
        if isinstance(exc, BaseExceptionGroup) and not _is_group_mapping(self._lookup(exc)):
            return any(self.is_programming_error(leaf) for leaf in self._leaves(exc))
        return isinstance(exc, PROGRAMMING_ERRORS) and self._lookup(exc) is None

    def _lookup(self, exc: BaseException) -> tuple[type[BaseException], Mapper] | None:
        """The most specific registered class in `exc`'s MRO, and its mapper.

        This classifier's own mappings (the built-in ones and the user's) come first for
        each class, then the SDKs' built-in ones.
        """
        if _SDKS_PENDING:
            _load_sdk_mappers()
        for klass in type(exc).__mro__:
            mapper = self._mappers.get(klass) or _SDK_MAPPERS.get(klass)
            if mapper is not None:
                return klass, mapper
        return None

    def _leaves(self, group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
        """The group's failures, nested groups flattened (unless a mapper claims one)."""
        leaves: list[BaseException] = []
        for exc in group.exceptions:
            if isinstance(exc, BaseExceptionGroup) and not _is_group_mapping(self._lookup(exc)):
                leaves += self._leaves(exc)
            else:
                leaves.append(exc)
        return leaves

    def _group_error(self, group: BaseExceptionGroup[BaseException]) -> AgentError:
        """One failure from a group's leaves (the rule is in the module docstring)."""
        leaves = self._leaves(group)
        errors = [self.to_agent_error(leaf) for leaf in leaves]
        retryable = all(error.retryable for error in errors)
        candidates = errors if retryable else [e for e in errors if not e.retryable]
        # max() keeps the first of equals: the earliest leaf of the strictest category.
        decider = max(candidates, key=lambda error: _STRICTNESS[error.category])
        error_type = decider.error_type
        retry_after = decider.retry_after
        if retryable:
            same = [e.error_type for e in errors if e.category is decider.category]
            error_type = collections.Counter(same).most_common(1)[0][0]
            hints = [hint for e in errors if (hint := _hint(e.retry_after)[0]) is not None]
            retry_after = max(hints, default=None)
        message = decider.message or decider.error_type
        if len(errors) > 1:
            message = f"{message} (and {len(errors) - 1} more failures in the group)"
        return AgentError(
            message,
            category=decider.category,
            error_type=error_type,
            retryable=retryable,
            alternative_approaches=dict.fromkeys(
                name for error in errors for name in error.alternative_approaches
            ),
            user_message=decider.user_message,
            retry_after=retry_after,
            details=_group_details(group, leaves, errors),
            field=decider.field,
        )

    def may_have_taken_effect(self, exc: BaseException) -> bool:
        """Whether the failed call may have acted anyway, so that repeating it could act twice.

        Used to refuse the automatic retry of a non-idempotent tool after an ambiguous
        failure: a timeout, a connection dropped mid-request, a 500/502/504. A failure that
        happened before the request was sent, or a server's refusal before acting
        (429, 503, 529, 408, validation, permission), is not ambiguous.
        """
        known = _classify_sdk.may_have_taken_effect(exc)
        if known is None:
            known = _classify_openai.may_have_taken_effect(exc)
        if known is None:
            known = _classify_google.may_have_taken_effect(exc)
        if known is None:
            known = _classify_a2a.may_have_taken_effect(exc)
        if known is not None:
            return known
        if isinstance(exc, BaseExceptionGroup) and not _is_group_mapping(self._lookup(exc)):
            return any(self.may_have_taken_effect(leaf) for leaf in self._leaves(exc))
        # Cut in the middle, by a timeout or a stray cancellation: it may have acted.
        return self.to_agent_error(exc).error_type in (ErrorType.TIMEOUT, ErrorType.CANCELLED)

    def classify(
        self,
        exc: BaseException,
        *,
        source: str,
        attempted_query: str | dict[str, Any],
        attempts: int,
        partial_results: PartialResults | None = None,
        alternative_approaches: Iterable[str] = (),
    ) -> ErrorEnvelope:
        """The envelope for `exc`.

        Args:
            exc: what was raised.
            source: the subagent or tool that produced it.
            attempted_query: exactly what was tried.
            attempts: attempts made locally before giving up.
            partial_results: work done before the failure; left out when empty.
            alternative_approaches: approaches the coordinator may try instead, put before
                the error's own (order kept, duplicates dropped).
        """
        if isinstance(alternative_approaches, str):
            raise UsageError("alternative_approaches must be a list of names, not one string")
        if attempts < 0:
            raise UsageError(f"attempts must be >= 0, got {attempts!r}")
        error = self.to_agent_error(exc)
        alternatives = tuple(
            dict.fromkeys([*alternative_approaches, *error.alternative_approaches])
        )
        redact = _redactor(exc)
        retry_after, ignored = _hint(error.retry_after)
        field = getattr(error, "field", None)
        details = "; ".join(
            filter(None, [f"field: {field}" if field else None, error.details, ignored])
        )
        finals = self._final_envelopes(exc)
        if finals:
            partial_results = _merged(partial_results, *(e.partial_results for e in finals))
        return ErrorEnvelope(
            error_category=error.category,
            error_type=error.error_type,
            is_retryable=error.retryable,
            message=redact(error.message or error.error_type),
            attempted_query=attempted_query,
            source=source,
            attempts=attempts,
            partial_results=(
                None if partial_results is None or partial_results.is_empty else partial_results
            ),
            alternative_approaches=alternatives or None,
            details=redact(details) if details else None,
            user_message=redact(error.user_message) if error.user_message else None,
            retry_after=retry_after,
            policy=_ruling(finals),
        )

    def _final_envelopes(self, exc: BaseException) -> list[ErrorEnvelope]:
        """The envelopes of the `CallFailed` leaves of a group (none for anything else)."""
        if not isinstance(exc, BaseExceptionGroup) or _is_group_mapping(self._lookup(exc)):
            return []
        return [leaf.envelope for leaf in self._leaves(exc) if isinstance(leaf, CallFailed)]


def classify(
    exc: BaseException,
    *,
    source: str,
    attempted_query: str | dict[str, Any],
    attempts: int,
    partial_results: PartialResults | None = None,
    alternative_approaches: Iterable[str] = (),
) -> ErrorEnvelope:
    """`Classifier.classify` with `default_classifier`."""
    return default_classifier.classify(
        exc,
        source=source,
        attempted_query=attempted_query,
        attempts=attempts,
        partial_results=partial_results,
        alternative_approaches=alternative_approaches,
    )


# --- what an envelope copies from an error ------------------------------------------


def _hint(value: object) -> tuple[float | None, str | None]:
    """A usable retry-after in seconds, or None and why the value was ignored.

    It comes from user code and mappers: NaN, infinity, a negative number or a string
    would break the envelope or the backoff, so it counts as no hint, said in details.
    """
    if value is None:
        return None, None
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    ):
        return float(value), None
    shown = repr(value)[:50]
    return None, f"retry_after {shown} ignored: not a finite number of seconds >= 0"


def _redactor(exc: BaseException) -> Callable[[str], str]:
    """Removes credentials from text copied out of `exc` into an envelope.

    We never read the request's credential headers, but an exception's text may echo
    them; their values (from any request in the cause chain) and anything shaped like an
    Anthropic API key are replaced.
    """
    secrets: set[str] = set()
    seen: set[int] = set()
    # The cause chain, and the leaves of groups: each may hold a request.
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        request = _classify_sdk.request_of(current)
        if request is not None:
            for name in _SECRET_HEADERS:
                value = request.headers.get(name, "")
                # "Bearer <token>": the token may appear on its own.
                secrets.update(part for part in (value, *value.split()[1:]) if len(part) >= 8)
        following = current.__cause__ or current.__context__
        if following is not None:
            todo.append(following)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
    ordered = sorted(secrets, key=len, reverse=True)

    def redact(text: str) -> str:
        for secret in ordered:
            text = text.replace(secret, REDACTED)
        return redact_text(_API_KEY.sub(REDACTED, text))

    return redact


# The SDKs' mappings, loaded the first time an exception is classified after the SDK was
# imported: an exception of an SDK cannot exist before, and importing agentmesh must not
# cost the anthropic SDK's second. Shared by every classifier; their own registrations
# still win for the same class.
_SDK_MAPPERS: dict[type[BaseException], Mapper] = {}
# By the SDK's module name: httpx2's, anthropic's and MCP's (`_sdk`), then each model
# provider's from a module of its own (which builds on `_sdk`'s HTTP meaning).
_SDK_MAPPINGS: dict[str, Callable[[], dict[type[BaseException], Mapper]]] = {
    **_classify_sdk.SDK_MAPPINGS,
    "openai": _classify_openai.mappers,
    "google.genai": _classify_google.mappers,
    "a2a": _classify_a2a.mappers,
}
_SDKS_PENDING: set[str] = set(_SDK_MAPPINGS)


def _load_sdk_mappers() -> None:
    for name in tuple(_SDKS_PENDING):  # a copy: another thread may load one meanwhile
        if name in sys.modules:
            _SDK_MAPPERS.update(_SDK_MAPPINGS[name]())
            _SDKS_PENDING.discard(name)


default_classifier: Classifier = Classifier()
"""The classifier `classify` uses, with the built-in mappings."""
