"""Claude on Amazon Bedrock and Google Vertex AI, as `FakeMessagesAPI` serves them.

The anthropic SDK's `AsyncAnthropicBedrock` posts the Messages body (without `model`) to
`/model/{model}/invoke`, or `/model/{model}/invoke-with-response-stream`, whose answer
is AWS event-stream frames; it signs with AWS SigV4 (or sends a Bedrock API key as a
bearer token). `AsyncAnthropicVertex` posts it to
`/projects/{p}/locations/{r}/publishers/anthropic/models/{model}:rawPredict` (or
`:streamRawPredict`, server-sent events as the Messages API's) with a Google OAuth bearer
token, which a service account's key buys at its `token_uri`: `GOOGLE_TOKEN_PATH` here
answers that exchange, so Google's default credentials work offline.

Both answer in the Messages format; their own errors have shapes of their own, built
here: Bedrock's `{"message": ...}` named by `x-amzn-errortype`, Vertex's Google
`{"error": {"code", "message", "status"}}`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentmesh.errors import UsageError

__all__ = [
    "BEDROCK_EXCEPTIONS",
    "GOOGLE_TOKEN_PATH",
    "CloudRoute",
    "bedrock_error",
    "bedrock_exception_for",
    "cloud_route",
    "event_stream",
    "google_token",
    "sigv4_access_key",
    "vertex_error",
]

_BEDROCK = re.compile(r"/model/(?P<model>[^/]+)/(?P<action>invoke|invoke-with-response-stream)")
_VERTEX = re.compile(
    r"/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/"
    r"(?P<model>[^/:]+):(?P<action>rawPredict|streamRawPredict)"
)
GOOGLE_TOKEN_PATH = "/oauth2/token"
"""Where the fake sells Google access tokens (a service account's `token_uri`)."""
_SIGV4 = re.compile(r"AWS4-HMAC-SHA256\s+Credential=(?P<key>[^/,\s]+)/")

BEDROCK_EXCEPTIONS: dict[str, tuple[int, str]] = {
    "ThrottlingException": (429, "Too many requests, please wait before trying again."),
    "ServiceUnavailableException": (503, "Bedrock is unable to process your request."),
    "ModelNotReadyException": (429, "Model is not ready to serve inference requests."),
    "ModelTimeoutException": (408, "Model has timed out in processing the request."),
    "ModelErrorException": (424, "The request failed due to an error while processing the model."),
    "InternalServerException": (500, "The server encountered an internal error."),
    "ValidationException": (
        400,
        "Malformed input request, please reformat your input and try again.",
    ),
    "ServiceQuotaExceededException": (
        400,
        "Too many tokens per day, please wait before trying again.",
    ),
    "AccessDeniedException": (
        403,
        "You don't have access to the model with the specified model ID.",
    ),
    "UnrecognizedClientException": (403, "The security token included in the request is invalid."),
    "ResourceNotFoundException": (
        404,
        "Could not resolve the foundation model from the model identifier.",
    ),
}
"""Bedrock Runtime's InvokeModel errors: exception name -> (HTTP status, a real message)."""

_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_VERTEX_QUOTA = (
    "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model "
    "with base model: anthropic-claude. Please submit a quota increase request."
)


@dataclass(frozen=True, slots=True)
class CloudRoute:
    """What a Bedrock or Vertex path says: the platform, the model and whether it streams."""

    platform: Literal["bedrock", "vertex"]
    model: str
    stream: bool


def cloud_route(path: str) -> CloudRoute | None:
    """The route of a Bedrock or Vertex Messages path; None for any other path."""
    if found := _BEDROCK.fullmatch(path):
        streams = found["action"] == "invoke-with-response-stream"
        return CloudRoute("bedrock", found["model"], streams)
    if found := _VERTEX.fullmatch(path):
        return CloudRoute("vertex", found["model"], found["action"] == "streamRawPredict")
    return None


def google_token(index: int) -> bytes:
    """The answer to an OAuth token request: a bearer token valid for an hour."""
    token = {"access_token": f"ya29.fake-{index}", "expires_in": 3600, "token_type": "Bearer"}
    return json.dumps(token).encode()


def sigv4_access_key(authorization: str) -> str | None:
    """The access key id an AWS SigV4 `Authorization` header names, if it is one."""
    found = _SIGV4.match(authorization.strip())
    return found["key"] if found else None


def bedrock_error(
    exception: str, message: str | None = None, *, status: int | None = None
) -> tuple[int, bytes, dict[str, str]]:
    """Bedrock's answer for `exception`: status, `{"message": ...}` and its headers."""
    known = BEDROCK_EXCEPTIONS.get(exception)
    if known is None and status is None:
        raise UsageError(
            f"unknown Bedrock exception {exception!r}: pass status= or one of "
            + ", ".join(sorted(BEDROCK_EXCEPTIONS))
        )
    code, text = known or (0, exception)
    headers = {
        # The form Bedrock sends: the name, then the service's namespace.
        "x-amzn-errortype": f"{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/",
        "x-amzn-requestid": str(uuid.uuid4()),
    }
    body = json.dumps({"message": message if message is not None else text}).encode()
    return status if status is not None else code, body, headers


def bedrock_exception_for(status: int, error_code: str | None) -> str:
    """What Bedrock says where the Messages API says `status`: the fake's crowded-server
    answers (`rate_limit`, `overload`, `exhaust_quota`) on a Bedrock path."""
    if error_code is not None:
        return "ServiceQuotaExceededException"
    return "ThrottlingException" if status == 429 else "ServiceUnavailableException"


def vertex_error(status: int, message: str | None = None) -> bytes:
    """Vertex AI's own error body (a Google API error) for `status`."""
    if status == 429 and message is None:
        message = _VERTEX_QUOTA
    state = _GOOGLE_STATUS.get(status, "UNKNOWN")
    error = {"code": status, "message": message or state.replace("_", " ").lower(), "status": state}
    return json.dumps({"error": error}).encode()


def event_stream(events: Sequence[tuple[str, Mapping[str, Any]]]) -> Iterator[bytes]:
    """Messages stream events as Bedrock sends them: one AWS event-stream `chunk` frame
    each, its payload `{"bytes": base64(event JSON)}`; an `error` event becomes an
    exception frame named by its error type."""
    for name, data in events:
        if name == "error":
            error = data.get("error", {})
            headers = {
                ":message-type": "exception",
                ":exception-type": str(error.get("type", "internalServerException")),
                ":content-type": "application/json",
            }
            yield _frame(headers, json.dumps({"message": error.get("message", "")}).encode())
            continue
        payload = {"bytes": base64.b64encode(json.dumps(data).encode()).decode()}
        headers = {
            ":message-type": "event",
            ":event-type": "chunk",
            ":content-type": "application/json",
        }
        yield _frame(headers, json.dumps(payload).encode())


def _frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude, its CRC, string headers, payload, message CRC."""
    encoded = b"".join(
        struct.pack("!B", len(name))
        + name.encode()
        + b"\x07"
        + struct.pack("!H", len(value))
        # Type 7 is a string; the length is two bytes.
        + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message))
