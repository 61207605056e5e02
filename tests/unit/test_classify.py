"""Tests of `agentmesh.classify`: exceptions become envelopes a coordinator can act on.

Anthropic errors are built the way the SDK builds them: a real `httpx2.Response` (with its
request) and the decoded body, or the raw text when the body is not JSON.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import json
import socket
import time
from typing import Any

import anthropic
import httpx2
import pydantic
import pytest

from agentmesh.classify import Classifier, classify, default_classifier
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, PartialResults
from agentmesh.errors import (
    AgentError,
    BusinessError,
    InvalidInput,
    PermissionDenied,
    TransientError,
    UsageError,
)

URL = "http://127.0.0.1/v1/messages"
API_KEY = "sk-ant-api03-secretsecretsecret"
BEARER = "oauth-token-0123456789"


def make_request() -> httpx2.Request:
    """A request carrying credentials, as the SDK sends it."""
    return httpx2.Request(
        "POST", URL, headers={"x-api-key": API_KEY, "authorization": f"Bearer {BEARER}"}
    )


def status_error(
    status: int,
    error_type: str | None = None,
    *,
    headers: dict[str, str] | None = None,
    cls: type[anthropic.APIStatusError] = anthropic.APIStatusError,
    text: str | None = None,
    error_code: str | None = None,
) -> anthropic.APIStatusError:
    """An SDK status error: JSON body `{"type": "error", "error": {...}}`, or `text` as is."""
    request = make_request()
    body: object
    if text is not None:
        response = httpx2.Response(status, headers=headers, content=text, request=request)
        body, message = text, text
    else:
        error: dict[str, Any] = {"type": error_type, "message": f"{error_type} happened"}
        if error_code:
            error["details"] = {"error_code": error_code}
        body = {"type": "error", "error": error}
        response = httpx2.Response(status, headers=headers, json=body, request=request)
        message = f"Error code: {status} - {body}"
    return cls(message, response=response, body=body)


def envelope_of(exc: BaseException, **kwargs: Any) -> ErrorEnvelope:
    """Classify with the default classifier and fixed context fields."""
    return classify(exc, source="docs", attempted_query="q", attempts=1, **kwargs)


def pydantic_error() -> pydantic.ValidationError:
    """The error pydantic raises for a tool call with a bad `limit` and no `query`."""

    class SearchArgs(pydantic.BaseModel):
        limit: int
        query: str

    try:
        SearchArgs.model_validate({"limit": "many"})
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("validation should have failed")


class TestBuiltinExceptions:
    def test_timeout_error_is_transient_timeout(self) -> None:
        """A builtin TimeoutError is a retryable transient `timeout`."""
        envelope = envelope_of(TimeoutError("read took too long"))

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "timeout"
        assert envelope.is_retryable
        assert envelope.message == "read took too long"

    async def test_asyncio_timeout_is_transient_timeout(self) -> None:
        """The TimeoutError asyncio raises, message-less, still gets a message."""
        with pytest.raises(asyncio.TimeoutError) as info:
            await asyncio.wait_for(asyncio.sleep(1), timeout=0)

        envelope = envelope_of(info.value)

        assert envelope.error_type == "timeout"
        assert envelope.is_retryable
        assert envelope.message == "TimeoutError"

    @pytest.mark.parametrize(
        "exc",
        [
            ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
            ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
            BrokenPipeError(errno.EPIPE, "Broken pipe"),
            socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            OSError(errno.ENETUNREACH, "Network is unreachable"),
        ],
    )
    def test_network_errors_are_transient_unavailable(self, exc: OSError) -> None:
        """Connection failures and other network OSErrors are retryable `unavailable`."""
        envelope = envelope_of(exc)

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "unavailable"
        assert envelope.is_retryable

    def test_non_network_os_error_is_unexpected(self) -> None:
        """An OSError that is not about the network (a missing file) is `other`."""
        envelope = envelope_of(FileNotFoundError(errno.ENOENT, "No such file", "/x"))

        assert envelope.error_category is ErrorCategory.OTHER
        assert envelope.error_type == "unexpected_error"
        assert not envelope.is_retryable

    def test_permission_error_is_permission_denied(self) -> None:
        """A builtin PermissionError is a non-retryable `permission_denied`."""
        envelope = envelope_of(PermissionError(errno.EACCES, "Permission denied", "/etc/x"))

        assert envelope.error_category is ErrorCategory.PERMISSION
        assert envelope.error_type == "permission_denied"
        assert not envelope.is_retryable

    def test_pydantic_validation_error_names_the_fields(self) -> None:
        """A pydantic ValidationError is `invalid_input` with each field and its problem."""
        envelope = envelope_of(pydantic_error())

        assert envelope.error_category is ErrorCategory.VALIDATION
        assert envelope.error_type == "invalid_input"
        assert not envelope.is_retryable
        assert envelope.message.startswith("invalid input: limit: Input should be a valid integer")
        assert envelope.message.endswith("; query: Field required")
        assert "many" not in envelope.message

    def test_pydantic_nested_location_is_dotted(self) -> None:
        """A nested field is named by its dotted path."""
        adapter = pydantic.TypeAdapter(dict[str, list[int]])
        with pytest.raises(pydantic.ValidationError) as info:
            adapter.validate_python({"ids": [1, "x"]})

        envelope = envelope_of(info.value)

        assert envelope.message.startswith("invalid input: ids.1: Input should be a valid integer")


class TestUnknownExceptions:
    def test_unknown_exception_is_other_with_details(self) -> None:
        """An unknown exception is `other`, not retryable, with its type and text in details."""
        envelope = envelope_of(KeyError("user_id"))

        assert envelope.error_category is ErrorCategory.OTHER
        assert envelope.error_type == "unexpected_error"
        assert not envelope.is_retryable
        assert envelope.message == "'user_id'"
        assert envelope.details == "KeyError: 'user_id'"

    def test_message_falls_back_to_type_name(self) -> None:
        """An exception without text is described by its type name."""

        class Boom(Exception):
            pass

        envelope = envelope_of(Boom())

        assert envelope.message == "Boom"
        assert envelope.details is not None
        assert envelope.details.startswith("TestUnknownExceptions.test_message_falls_back")


class TestAnthropicStatusErrors:
    @pytest.mark.parametrize(
        ("cls", "status", "body_type", "category", "error_type"),
        [
            (
                anthropic.BadRequestError,
                400,
                "invalid_request_error",
                "validation",
                "invalid_request",
            ),
            (
                anthropic.AuthenticationError,
                401,
                "authentication_error",
                "permission",
                "authentication_failed",
            ),
            (
                anthropic.PermissionDeniedError,
                403,
                "permission_error",
                "permission",
                "permission_denied",
            ),
            (anthropic.NotFoundError, 404, "not_found_error", "validation", "not_found"),
            (anthropic.RequestTimeoutError, 408, "timeout_error", "transient", "timeout"),
            (anthropic.ConflictError, 409, "conflict_error", "transient", "conflict"),
            (
                anthropic.ContentTooLargeError,
                413,
                "request_too_large",
                "validation",
                "request_too_large",
            ),
            (
                anthropic.UnprocessableEntityError,
                422,
                "invalid_request_error",
                "validation",
                "invalid_request",
            ),
            (anthropic.RateLimitError, 429, "rate_limit_error", "transient", "rate_limited"),
            (anthropic.InternalServerError, 500, "api_error", "transient", "server_error"),
            (anthropic.InternalServerError, 502, None, "transient", "server_error"),
            (anthropic.ServiceUnavailableError, 503, "api_error", "transient", "unavailable"),
            (anthropic.GatewayTimeoutError, 504, None, "transient", "server_error"),
            (anthropic.OverloadedError, 529, "overloaded_error", "transient", "overloaded"),
            (anthropic.InternalServerError, 500, "overloaded_error", "transient", "overloaded"),
        ],
    )
    def test_status_and_body_type_decide(
        self,
        cls: type[anthropic.APIStatusError],
        status: int,
        body_type: str | None,
        category: str,
        error_type: str,
    ) -> None:
        """Each status class maps to its category and type; transient ones are retryable."""
        envelope = envelope_of(status_error(status, body_type, cls=cls))

        assert envelope.error_category == category
        assert envelope.error_type == error_type
        assert envelope.is_retryable is (category == "transient")

    def test_error_event_in_a_stream_uses_body_type(self) -> None:
        """An error event inside a streamed 200 response is classified by its body type."""
        envelope = envelope_of(status_error(200, "overloaded_error"))

        assert envelope.error_type == "overloaded"
        assert envelope.is_retryable

    def test_message_and_request_id(self) -> None:
        """The API's own message is used and the request-id is kept in details."""
        exc = status_error(529, "overloaded_error", headers={"request-id": "req_123"})

        envelope = envelope_of(exc)

        assert envelope.message == "overloaded_error happened"
        assert envelope.details == "request-id: req_123; HTTP 529 overloaded_error"

    def test_error_code_in_details(self) -> None:
        """The body's stable `error_code` is kept in details."""
        exc = status_error(429, "rate_limit_error", error_code="ramp_limit_exceeded")

        assert (
            envelope_of(exc).details == "HTTP 429 rate_limit_error; error_code: ramp_limit_exceeded"
        )

    def test_retry_after_ms_takes_precedence(self) -> None:
        """`retry-after-ms` wins over `retry-after` and is read as milliseconds."""
        headers = {"retry-after-ms": "1500", "retry-after": "30"}

        envelope = envelope_of(status_error(429, "rate_limit_error", headers=headers))

        assert envelope.retry_after == 1.5

    def test_retry_after_seconds(self) -> None:
        """`retry-after` alone is read as seconds."""
        envelope = envelope_of(status_error(529, "overloaded_error", headers={"retry-after": "7"}))

        assert envelope.retry_after == 7.0

    def test_retry_after_http_date(self) -> None:
        """`retry-after` as an HTTP date becomes the seconds left until then."""
        when = email.utils.formatdate(time.time() + 30, usegmt=True)

        envelope = envelope_of(status_error(429, "rate_limit_error", headers={"retry-after": when}))

        assert envelope.retry_after is not None
        assert 25 <= envelope.retry_after <= 31

    @pytest.mark.parametrize(
        "headers",
        [
            {},
            {"retry-after": "soon"},
            {"retry-after-ms": "-5"},
            {"retry-after": "nan"},
        ],
    )
    def test_retry_after_absent_or_invalid(self, headers: dict[str, str]) -> None:
        """A missing or unusable hint gives no `retry_after` rather than an error."""
        envelope = envelope_of(status_error(429, "rate_limit_error", headers=headers))

        assert envelope.retry_after is None
        assert envelope.is_retryable

    def test_past_retry_after_date_means_now(self) -> None:
        """A `retry-after` date already past is a wait of zero."""
        headers = {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}

        assert envelope_of(status_error(503, headers=headers)).retry_after == 0.0

    def test_x_should_retry_false_overrides(self) -> None:
        """`x-should-retry: false` makes an otherwise transient error not retryable."""
        exc = status_error(529, "overloaded_error", headers={"x-should-retry": "false"})

        envelope = envelope_of(exc)

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert not envelope.is_retryable

    def test_x_should_retry_true_overrides(self) -> None:
        """`x-should-retry: true` makes a validation error retryable, its category kept."""
        exc = status_error(400, "invalid_request_error", headers={"x-should-retry": "true"})

        envelope = envelope_of(exc)

        assert envelope.error_category is ErrorCategory.VALIDATION
        assert envelope.is_retryable

    def test_non_json_body_is_transient(self) -> None:
        """A 5xx with an HTML body is transient, its text clipped into the message."""
        page = "<html><body>" + "Bad gateway. " * 100 + "</body></html>"
        exc = status_error(502, text=page, cls=anthropic.InternalServerError)

        envelope = envelope_of(exc)

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "server_error"
        assert envelope.is_retryable
        assert envelope.message.startswith("<html><body>Bad gateway.")
        assert len(envelope.message) == 500

    def test_non_json_body_keeps_a_client_status(self) -> None:
        """A 4xx with a non-JSON body is still classified by its status."""
        envelope = envelope_of(status_error(401, text="Unauthorized"))

        assert envelope.error_type == "authentication_failed"
        assert envelope.message == "Unauthorized"

    @pytest.mark.parametrize(
        "body",
        [
            ["not", "a", "dict"],
            {"error": "flat string"},
            {"error": {"type": ["unhashable"], "message": {"nested": True}}},
        ],
    )
    def test_unexpected_json_shapes_do_not_crash(self, body: object) -> None:
        """A JSON body of an unexpected shape is classified by status, never a crash."""
        response = httpx2.Response(503, json=body, request=make_request())
        exc = anthropic.InternalServerError(
            f"Error code: 503 - {body}", response=response, body=body
        )

        envelope = envelope_of(exc)

        assert envelope.error_type == "unavailable"
        assert envelope.details == "HTTP 503"

    def test_response_validation_error_is_transient(self) -> None:
        """A 200 whose body does not match the schema is transient `invalid_response`."""
        response = httpx2.Response(
            200, headers={"request-id": "req_9"}, content=b"{oops", request=make_request()
        )
        exc = anthropic.APIResponseValidationError(response=response, body="{oops")

        envelope = envelope_of(exc)

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "invalid_response"
        assert envelope.is_retryable
        assert envelope.details == "request-id: req_9; HTTP 200, body not as expected"

    def test_credentials_never_reach_the_envelope(self) -> None:
        """API key and Authorization values are redacted even when an error text echoes them."""
        api = status_error(401, "authentication_error", headers={"request-id": "req_1"})
        try:
            raise RuntimeError(f"call failed with key={API_KEY} token={BEARER}") from api
        except RuntimeError as caught:
            wrapped = caught

        for exc in (api, wrapped):
            text = envelope_of(exc).to_json()
            assert API_KEY not in text
            assert BEARER not in text
        assert "[REDACTED]" in envelope_of(wrapped).message

    def test_api_key_shaped_text_is_redacted(self) -> None:
        """Anything shaped like an Anthropic API key is redacted from any exception's text."""
        envelope = envelope_of(ValueError("bad key sk-ant-api03-AbC_d-9"))

        assert envelope.message == "bad key [REDACTED]"
        assert "sk-ant-" not in (envelope.details or "")


class TestAnthropicConnectionErrors:
    def test_api_timeout_is_transient_timeout(self) -> None:
        """APITimeoutError is a retryable `timeout`, its cause in details."""
        exc = anthropic.APITimeoutError(request=make_request())
        exc.__cause__ = httpx2.ReadTimeout("The read operation timed out")

        envelope = envelope_of(exc)

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "timeout"
        assert envelope.is_retryable
        assert envelope.details == "ReadTimeout: The read operation timed out"

    def test_api_connection_error_is_transient_unavailable(self) -> None:
        """APIConnectionError is a retryable `unavailable`."""
        envelope = envelope_of(anthropic.APIConnectionError(request=make_request()))

        assert envelope.error_type == "unavailable"
        assert envelope.is_retryable
        assert envelope.message == "Connection error."


class TestHttpx2Errors:
    @pytest.mark.parametrize(
        ("exc", "error_type"),
        [
            (httpx2.ConnectTimeout("timed out"), "timeout"),
            (httpx2.ReadTimeout("timed out"), "timeout"),
            (httpx2.ConnectError("refused"), "unavailable"),
            (httpx2.RemoteProtocolError("peer closed connection"), "unavailable"),
        ],
    )
    def test_transport_errors_are_transient(self, exc: httpx2.HTTPError, error_type: str) -> None:
        """httpx2 timeouts and transport failures are retryable transient errors."""
        envelope = envelope_of(exc)

        assert envelope.error_type == error_type
        assert envelope.is_retryable

    def test_status_error_uses_status_and_headers(self) -> None:
        """`raise_for_status()` errors map by status, with retry-after and without the query."""
        request = httpx2.Request("GET", "http://127.0.0.1/search?token=hunter2hunter2")
        response = httpx2.Response(429, headers={"retry-after": "3"}, request=request)
        with pytest.raises(httpx2.HTTPStatusError) as info:
            response.raise_for_status()

        envelope = envelope_of(info.value)

        assert envelope.error_type == "rate_limited"
        assert envelope.retry_after == 3.0
        assert envelope.message == "HTTP 429 Too Many Requests"
        assert envelope.details == "HTTP 429; GET http://127.0.0.1/search"


class TestAgentErrors:
    def test_agent_error_maps_to_itself(self) -> None:
        """An AgentError is its own classification."""
        exc = BusinessError("order shipped", user_message="Your order has already shipped.")

        assert default_classifier.to_agent_error(exc) is exc

    def test_fields_carried_and_alternatives_merged(self) -> None:
        """The error's fields reach the envelope; alternatives merge, given ones first."""
        exc = TransientError(
            "search backend busy",
            error_type="rate_limited",
            retry_after=2.5,
            details="shard 3",
            alternative_approaches=["cached_index", "narrow_query"],
        )

        envelope = envelope_of(exc, alternative_approaches=["narrow_query", "web_search"])

        assert envelope.error_type == "rate_limited"
        assert envelope.retry_after == 2.5
        assert envelope.details == "shard 3"
        assert envelope.alternative_approaches == ("narrow_query", "web_search", "cached_index")

    def test_business_error_keeps_user_message(self) -> None:
        """A business error keeps its customer-friendly text and is not retryable."""
        exc = BusinessError("refund window closed", user_message="Refunds end after 30 days.")

        envelope = envelope_of(exc)

        assert envelope.error_category is ErrorCategory.BUSINESS
        assert envelope.user_message == "Refunds end after 30 days."
        assert not envelope.is_retryable


class TestRegistry:
    def test_user_registration_beats_builtin(self) -> None:
        """A user mapping for a type with a built-in mapping replaces it."""
        classifier = Classifier()
        classifier.register(TimeoutError, lambda e: BusinessError(f"too slow: {e}"))

        envelope = classifier.classify(
            TimeoutError("x"), source="s", attempted_query="q", attempts=1
        )

        assert envelope.error_category is ErrorCategory.BUSINESS
        assert envelope.message == "too slow: x"

    def test_user_registration_of_sdk_subclass_beats_builtin(self) -> None:
        """A mapping for one SDK error class wins over the built-in APIStatusError mapping."""
        classifier = Classifier()
        classifier.register(
            anthropic.RateLimitError,
            lambda e: PermissionDenied("quota exhausted", error_type="quota_exhausted"),
        )

        error = classifier.to_agent_error(status_error(429, cls=anthropic.RateLimitError))

        assert error.error_type == "quota_exhausted"

    def test_most_specific_type_wins(self) -> None:
        """The mapping of the nearest class in the exception's MRO is used."""

        class StoreError(Exception):
            pass

        class StoreDown(StoreError):
            pass

        class ReplicaDown(StoreDown):
            pass

        classifier = Classifier()
        classifier.register(StoreError, lambda e: InvalidInput("bad"))
        classifier.register(StoreDown, lambda e: TransientError("down"))

        assert classifier.to_agent_error(StoreError()).message == "bad"
        assert classifier.to_agent_error(ReplicaDown()).message == "down"

    def test_broad_registration_does_not_shadow_specific_builtins(self) -> None:
        """A user mapping for Exception catches unknowns but not more specific built-ins."""
        classifier = Classifier()
        classifier.register(Exception, lambda e: BusinessError("caught"))

        assert classifier.to_agent_error(KeyError("k")).message == "caught"
        assert classifier.to_agent_error(TimeoutError()).error_type == "timeout"

    def test_copy_is_independent(self) -> None:
        """Registering on a copy changes neither the original nor the default classifier."""

        class Custom(Exception):
            pass

        original = Classifier()
        clone = original.copy()
        clone.register(Custom, lambda e: TransientError("custom"))

        assert clone.to_agent_error(Custom()).message == "custom"
        assert original.to_agent_error(Custom()).error_type == "unexpected_error"
        assert default_classifier.to_agent_error(Custom()).error_type == "unexpected_error"
        assert clone.to_agent_error(TimeoutError()).error_type == "timeout"

    def test_failing_mapper_never_crashes(self) -> None:
        """A mapper that raises gives an `other` envelope naming the mapper's failure."""

        class Custom(Exception):
            pass

        def broken(exc: Custom) -> AgentError:
            raise LookupError("no table")

        classifier = Classifier()
        classifier.register(Custom, broken)

        envelope = classifier.classify(Custom("x"), source="s", attempted_query="q", attempts=1)

        assert envelope.error_type == "unexpected_error"
        assert envelope.message == "x"
        assert envelope.details is not None
        assert envelope.details.startswith("TestRegistry.test_failing_mapper_never_crashes")
        assert envelope.details.endswith("<locals>.Custom raised LookupError: no table)")

    def test_mapper_returning_non_agent_error_never_crashes(self) -> None:
        """A mapper that returns something else than an AgentError is reported, not trusted."""
        classifier = Classifier()
        classifier.register(KeyError, lambda e: "oops")  # type: ignore[arg-type,return-value]

        error = classifier.to_agent_error(KeyError("k"))

        assert error.error_type == "unexpected_error"
        assert error.details is not None
        assert "returned str, not an AgentError" in error.details

    @pytest.mark.parametrize("exc_type", [ValueError("x"), int, "TimeoutError"])
    def test_register_rejects_non_exception_types(self, exc_type: Any) -> None:
        """Registering something that is not an exception class is a UsageError."""
        with pytest.raises(UsageError, match="exc_type"):
            Classifier().register(exc_type, lambda e: AgentError("x"))

    def test_register_rejects_non_callable_mapper(self) -> None:
        """A mapper that cannot be called is a UsageError."""
        with pytest.raises(UsageError, match="mapper"):
            Classifier().register(KeyError, "not callable")  # type: ignore[arg-type]


class TestMayHaveTakenEffect:
    @staticmethod
    def caused(exc: BaseException, cause: BaseException) -> BaseException:
        """`exc` raised from `cause`, as the SDK chains its connection errors."""
        exc.__cause__ = cause
        return exc

    @pytest.mark.parametrize(
        "exc",
        [
            TimeoutError(),
            ConnectionResetError(),
            BrokenPipeError(),
            httpx2.ReadTimeout("timed out"),
            httpx2.RemoteProtocolError("peer closed"),
            AgentError("slow", error_type="timeout"),
            TransientError("slow", error_type="timeout"),
            status_error(500, "api_error"),
            status_error(502, text="Bad Gateway"),
            status_error(504),
            status_error(200, "overloaded_error"),
            status_error(503, "api_error", error_code="change_outcome_unknown"),
        ],
        ids=repr,
    )
    def test_ambiguous_failures(self, exc: BaseException) -> None:
        """After a timeout, a dropped connection or a 500/502/504, the call may have acted."""
        assert default_classifier.may_have_taken_effect(exc)

    def test_sdk_connection_errors_after_sending(self) -> None:
        """An SDK connection or timeout error after the request went out may have acted."""
        read = self.caused(
            anthropic.APITimeoutError(request=make_request()), httpx2.ReadTimeout("slow")
        )
        dropped = self.caused(
            anthropic.APIConnectionError(request=make_request()), httpx2.ReadError("reset")
        )
        no_cause = anthropic.APIConnectionError(request=make_request())

        assert default_classifier.may_have_taken_effect(read)
        assert default_classifier.may_have_taken_effect(dropped)
        assert default_classifier.may_have_taken_effect(no_cause)

    def test_sdk_connection_errors_before_sending(self) -> None:
        """An SDK error whose cause is a failed connect never reached the server."""
        refused = self.caused(
            anthropic.APIConnectionError(request=make_request()), httpx2.ConnectError("refused")
        )
        connect_timeout = self.caused(
            anthropic.APITimeoutError(request=make_request()), httpx2.ConnectTimeout("slow")
        )

        assert not default_classifier.may_have_taken_effect(refused)
        assert not default_classifier.may_have_taken_effect(connect_timeout)

    def test_response_validation_error_has_acted(self) -> None:
        """A success response with an unexpected body means the server did act."""
        response = httpx2.Response(200, content=b"{oops", request=make_request())
        exc = anthropic.APIResponseValidationError(response=response, body="{oops")

        assert default_classifier.may_have_taken_effect(exc)

    @pytest.mark.parametrize(
        "exc",
        [
            ConnectionRefusedError(),
            socket.gaierror(socket.EAI_NONAME, "unknown host"),
            httpx2.ConnectError("refused"),
            httpx2.ConnectTimeout("slow connect"),
            status_error(429, "rate_limit_error"),
            status_error(529, "overloaded_error"),
            status_error(503, "api_error"),
            status_error(408, "timeout_error"),
            status_error(400, "invalid_request_error"),
            status_error(401, "authentication_error"),
            PermissionError(),
            pydantic_error(),
            BusinessError("shipped"),
            InvalidInput("bad query"),
            KeyError("k"),
        ],
        ids=repr,
    )
    def test_clean_refusals(self, exc: BaseException) -> None:
        """A failure before sending, or a refusal before acting, cannot have taken effect."""
        assert not default_classifier.may_have_taken_effect(exc)

    def test_user_mapping_to_timeout_counts(self) -> None:
        """A user exception mapped to a `timeout` is treated as ambiguous too."""

        class DeadlineHit(Exception):
            pass

        classifier = Classifier()
        classifier.register(DeadlineHit, lambda e: TransientError("late", error_type="timeout"))

        assert classifier.may_have_taken_effect(DeadlineHit())
        assert not default_classifier.may_have_taken_effect(DeadlineHit())


class TestEnvelopeFields:
    def test_context_fields(self) -> None:
        """Source, attempted query and attempts are carried as given."""
        query = {"tool": "search_docs", "arguments": {"query": "asyncio"}}

        envelope = classify(TimeoutError(), source="docs", attempted_query=query, attempts=3)

        assert envelope.source == "docs"
        assert envelope.attempted_query == query
        assert envelope.attempts == 3
        assert envelope.is_error is True

    @pytest.mark.parametrize("partial", [None, PartialResults()])
    def test_partial_results_absent_when_empty(self, partial: PartialResults | None) -> None:
        """No partial results, or empty ones, leave `partialResults` out of the envelope."""
        envelope = envelope_of(TimeoutError(), partial_results=partial)

        assert envelope.partial_results is None
        assert "partialResults" not in envelope.to_dict()

    def test_partial_results_kept(self) -> None:
        """Work done before the failure is kept."""
        partial = PartialResults(completed=("docs",), findings=({"title": "Cancellation"},))

        envelope = envelope_of(TimeoutError(), partial_results=partial)

        assert envelope.partial_results == partial

    def test_no_alternatives_is_none(self) -> None:
        """Without alternatives from either side the field is absent."""
        envelope = envelope_of(KeyError("k"))

        assert envelope.alternative_approaches is None
        assert "alternativeApproaches" not in envelope.to_dict()

    def test_wire_form_round_trips(self) -> None:
        """The classified envelope serialises to camelCase JSON and reads back equal."""
        envelope = envelope_of(status_error(529, "overloaded_error", headers={"retry-after": "2"}))

        data = json.loads(envelope.to_json())

        assert data["errorType"] == "overloaded"
        assert data["retryAfter"] == 2.0
        assert ErrorEnvelope.model_validate(data) == envelope

    def test_alternatives_as_one_string_is_rejected(self) -> None:
        """A single string for alternative_approaches is a UsageError, not a list of letters."""
        with pytest.raises(UsageError, match="alternative_approaches"):
            envelope_of(TimeoutError(), alternative_approaches="narrow_query")

    def test_negative_attempts_rejected(self) -> None:
        """A negative attempt count is a UsageError naming the argument."""
        with pytest.raises(UsageError, match="attempts"):
            classify(TimeoutError(), source="s", attempted_query="q", attempts=-1)
