"""Exception -> `AgentError` -> `ErrorEnvelope`.

A `Classifier` turns whatever a tool or subagent raised into our vocabulary (category,
error type, retryability, the server's retry-after hint), then into an envelope. Mappers
are looked up along the exception's MRO, so the most specific registered type wins; a
user's `register` for a type replaces the built-in mapping of that type.

Built-in mappings::

    AgentError                          itself
    TimeoutError (asyncio, socket)      transient   timeout
    ConnectionError                     transient   unavailable
    OSError from the network (DNS,      transient   unavailable
      unreachable host); other OSError  other       unexpected_error
    PermissionError                     permission  permission_denied
    pydantic.ValidationError            validation  invalid_input, naming the fields
    anthropic and httpx2 errors         by HTTP status and body (see `_sdk`),
                                          loaded once the SDK has been imported
    google.genai errors (Gemini)        by Google's status and details (see `_google`),
                                          loaded once the SDK has been imported
    openai errors                       by error code, then HTTP status (see `_openai`),
                                          loaded the same way
    a2a-sdk client errors               by HTTP status, transport, JSON-RPC error (see `_a2a`),
                                          loaded the same way
    asyncio.CancelledError (stray:      transient   cancelled
      the task is not being cancelled)
    CallFailed                          its envelope's category and type, not retryable
                                          (it was retried where it happened)
    an exception group                  from its leaves, see below
    anything else                       other       unexpected_error (never hidden)

Exception groups (`TaskGroup`, anyio, the MCP SDK) are flattened to their leaves and each
leaf is classified with the same registry. When every leaf is retryable, the group is one
retryable failure of the strictest leaf category, with the error type most of those
leaves share (the first one on a tie) and the longest `retry_after`. Otherwise the
strictest non-retryable leaf decides: permission > business > validation > other >
transient. `details` names every leaf; a mapper registered for a group class itself
is used instead. A `CallFailed` leaf also brings its envelope's policy ruling and partial
results.

Strict mode (`set_strict(True)`, `with strict():`, or the environment variable
`AGENTMESH_STRICT=1`) is for development: a programming error (`AttributeError`,
`NameError`, `TypeError`, `AssertionError`) that escapes a subagent's body or a tool's
function, and that this classifier has no mapping for, is re-raised at once with its
traceback instead of becoming an `other` envelope.
"""

from agentmesh._signatures import kept_for_one_release
from agentmesh.classify import _strict
from agentmesh.classify._classifier import Classifier, classify, default_classifier
from agentmesh.classify._strict import is_strict, set_strict, strict

__all__ = [
    "Classifier",
    "classify",
    "default_classifier",
    "is_strict",
    "set_strict",
    "strict",
]

__getattr__ = kept_for_one_release(
    __name__,
    {
        "PROGRAMMING_ERRORS": ("is internal to agentmesh", lambda: _strict.PROGRAMMING_ERRORS),
    },
)
