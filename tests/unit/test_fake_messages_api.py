"""FakeMessagesAPI, driven by the real anthropic SDK over loopback HTTP."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import pytest

from agentmesh import UsageError
from agentmesh.testing import FakeMessagesAPI, RecordedRequest, Reply

# The in-process pytester run below checks that the entry point registers the fixture.
pytest_plugins = ["pytester"]

F = FakeMessagesAPI
ASK: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}


@asynccontextmanager
async def client_for(
    api: FakeMessagesAPI, **options: Any
) -> AsyncIterator[anthropic.AsyncAnthropic]:
    options.setdefault("api_key", "sk-ant-test")
    async with anthropic.AsyncAnthropic(base_url=api.base_url, max_retries=0, **options) as client:
        yield client


def raw_post(
    api: FakeMessagesAPI, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, Any]:
    """POST without the SDK, for requests the SDK refuses to make (no credentials)."""
    host, port = api.base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


class TestReplies:
    async def test_text_reply_is_a_message(self, fake_messages_api: FakeMessagesAPI) -> None:
        """A scripted text reply reaches the SDK as a Message with usage and a request id."""
        fake_messages_api.enqueue(F.text("hello", input_tokens=7, output_tokens=3))
        async with client_for(fake_messages_api) as client:
            message = await client.messages.create(**ASK)

        assert message.type == "message"
        assert message.role == "assistant"
        assert message.model == "claude-test"
        assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", "hello")]
        assert message.stop_reason == "end_turn"
        assert (message.usage.input_tokens, message.usage.output_tokens) == (7, 3)
        assert message._request_id == fake_messages_api.requests[0].request_id

    async def test_tool_use_reply(self, fake_messages_api: FakeMessagesAPI) -> None:
        """A scripted tool call arrives as a ToolUseBlock with its id, name and input."""
        fake_messages_api.enqueue(
            F.tool_use("search", {"query": "asyncio", "limit": 3}, id="toolu_1", text="Looking.")
        )
        async with client_for(fake_messages_api) as client:
            message = await client.messages.create(**ASK)

        assert message.stop_reason == "tool_use"
        text, call = message.content
        assert isinstance(text, anthropic.types.TextBlock)
        assert text.text == "Looking."
        assert isinstance(call, anthropic.types.ToolUseBlock)
        assert (call.id, call.name, call.input) == (
            "toolu_1",
            "search",
            {"query": "asyncio", "limit": 3},
        )

    async def test_message_with_several_tool_calls(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """`message` takes blocks; with a tool_use among them the stop reason is tool_use."""
        fake_messages_api.enqueue(
            F.message([F.tool_use_block("docs", {"q": "a"}), F.tool_use_block("web", {"q": "b"})])
        )
        async with client_for(fake_messages_api) as client:
            message = await client.messages.create(**ASK)

        assert message.stop_reason == "tool_use"
        calls = [b for b in message.content if isinstance(b, anthropic.types.ToolUseBlock)]
        assert [c.name for c in calls] == ["docs", "web"]
        assert calls[0].id != calls[1].id

    async def test_a_raw_usage_block_is_sent_as_it_is(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """`usage=` replaces the counts: a negative or a 400-digit count reaches the SDK."""
        fake_messages_api.enqueue(
            F.text("hi", usage={"input_tokens": -5, "output_tokens": 10**400}),
            F.tool_use("search", {}, usage={"input_tokens": 3, "output_tokens": 2}),
        )
        async with client_for(fake_messages_api) as client:
            absurd = await client.messages.create(**ASK)
            plain = await client.messages.create(**ASK)

        assert (absurd.usage.input_tokens, absurd.usage.output_tokens) == (-5, 10**400)
        assert (plain.usage.input_tokens, plain.usage.output_tokens) == (3, 2)
        assert plain.stop_reason == "tool_use"

    def test_builders_reject_values_json_cannot_carry(self) -> None:
        """A tool input that is not JSON fails when the script is written, not mid-test."""
        with pytest.raises(UsageError, match="JSON"):
            F.tool_use("search", {"when": object()})
        with pytest.raises(UsageError, match="status"):
            F.error(200)


ERROR_CLASSES = [
    (400, anthropic.BadRequestError, "invalid_request_error"),
    (401, anthropic.AuthenticationError, "authentication_error"),
    (403, anthropic.PermissionDeniedError, "permission_error"),
    (404, anthropic.NotFoundError, "not_found_error"),
    (413, anthropic.ContentTooLargeError, "request_too_large"),
    (429, anthropic.RateLimitError, "rate_limit_error"),
    (500, anthropic.InternalServerError, "api_error"),
    (529, anthropic.OverloadedError, "overloaded_error"),
]


class TestErrors:
    @pytest.mark.parametrize(("status", "exception", "error_type"), ERROR_CLASSES)
    async def test_error_status_maps_to_the_sdk_exception(
        self,
        fake_messages_api: FakeMessagesAPI,
        status: int,
        exception: type[anthropic.APIStatusError],
        error_type: str,
    ) -> None:
        """Each error status raises the SDK's class, with the error body and retry headers."""
        fake_messages_api.enqueue(
            F.error(status, retry_after=2, retry_after_ms=1500, should_retry=False)
        )
        async with client_for(fake_messages_api) as client:
            with pytest.raises(exception) as caught:
                await client.messages.create(**ASK)

        error = caught.value
        assert error.status_code == status
        assert error.body == {
            "type": "error",
            "error": {"type": error_type, "message": error.body["error"]["message"]},  # type: ignore[index]
        }
        headers = error.response.headers
        assert (headers["retry-after"], headers["retry-after-ms"]) == ("2", "1500")
        assert headers["x-should-retry"] == "false"
        assert error.request_id == fake_messages_api.requests[0].request_id

    async def test_error_type_and_message_can_be_chosen(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A test can script an error the defaults do not cover."""
        fake_messages_api.enqueue(F.error(400, "invalid_request_error", "max_tokens: too big"))
        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.BadRequestError, match="max_tokens: too big"):
                await client.messages.create(**ASK)

    async def test_html_502_raises_an_sdk_error(self, fake_messages_api: FakeMessagesAPI) -> None:
        """A proxy's HTML 502 is an InternalServerError, and the server goes on serving."""
        fake_messages_api.enqueue(F.garbage(), F.text("still here"))
        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.InternalServerError, match="502 Bad Gateway") as caught:
                await client.messages.create(**ASK)
            after = await client.messages.create(**ASK)

        assert caught.value.status_code == 502
        assert caught.value.response.headers["content-type"] == "text/html"
        assert after.content[0].type == "text"

    async def test_unparseable_json_with_200(self, fake_messages_api: FakeMessagesAPI) -> None:
        """A 200 whose JSON is broken fails in the SDK (a ValueError), never in the server."""
        fake_messages_api.enqueue(
            F.garbage('{"type": "mess', status=200, content_type="application/json")
        )
        async with client_for(fake_messages_api) as client:
            with pytest.raises(ValueError, match="Unterminated string"):
                await client.messages.create(**ASK)
        assert fake_messages_api.problems == []

    async def test_html_with_200_is_returned_as_text(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A 200 with a non-JSON content type is not raised: the SDK hands back a str.

        Code that wraps the SDK must check that it got a Message.
        """
        fake_messages_api.enqueue(F.garbage("<html>captive portal</html>", status=200))
        async with client_for(fake_messages_api) as client:
            result: object = await client.messages.create(**ASK)

        assert result == "<html>captive portal</html>"

    async def test_slow_reply_times_the_client_out(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A slow reply makes the SDK's timeout fire; closing the server does not wait for it."""
        fake_messages_api.enqueue(F.slow(30, F.text("late")))
        started = time.monotonic()
        async with client_for(fake_messages_api, timeout=0.1) as client:
            with pytest.raises(anthropic.APITimeoutError):
                await client.messages.create(**ASK)
        fake_messages_api.close()

        # A real clock: the reply would take 30 s, so 2 s tells "not waited for" apart from
        # "waited for", with room for a loaded machine (the timeout itself is 0.1 s).
        assert time.monotonic() - started < 2

    async def test_slow_reply_does_not_block_other_requests(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """While one reply is held back, other requests are answered; close cuts it short."""
        slow_arrived = threading.Event()

        def first_slow_then_quick(request: RecordedRequest) -> Reply:
            if request.index == 0:
                slow_arrived.set()
                return F.slow(30, F.text("late"))
            return F.text("quick")

        fake_messages_api.handler = first_slow_then_quick
        async with client_for(fake_messages_api) as client:
            slow = asyncio.create_task(client.messages.create(**ASK))
            assert await asyncio.to_thread(slow_arrived.wait, 5)
            quick = await client.messages.create(**ASK)
            assert not slow.done()
            await asyncio.to_thread(fake_messages_api.close)
            with pytest.raises(anthropic.ServiceUnavailableError):
                await slow

        assert quick.content[0].type == "text"


class TestStreaming:
    async def test_streamed_text_assembles_the_final_message(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """With stream=true the reply is SSE events that the SDK assembles into the message."""
        fake_messages_api.enqueue(F.text("streamed in several pieces", output_tokens=5))
        async with (
            client_for(fake_messages_api) as client,
            client.messages.stream(**ASK) as stream,
        ):
            pieces = [piece async for piece in stream.text_stream]
            message = await stream.get_final_message()

        assert len(pieces) > 1
        assert "".join(pieces) == "streamed in several pieces"
        assert message.content[0].type == "text"
        assert message.stop_reason == "end_turn"
        assert message.usage.output_tokens == 5
        assert fake_messages_api.requests[0].stream

    async def test_a_raw_usage_block_is_streamed_as_it_is(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A raw usage block reaches a streaming client too: its counts, whatever they are."""
        fake_messages_api.enqueue(F.text("hi", usage={"input_tokens": -5, "output_tokens": 7}))
        async with (
            client_for(fake_messages_api) as client,
            client.messages.stream(**ASK) as stream,
        ):
            message = await stream.get_final_message()

        assert (message.usage.input_tokens, message.usage.output_tokens) == (-5, 7)

    async def test_streamed_tool_use_input_is_assembled(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A tool call's input arrives as input_json_delta pieces and is parsed whole."""
        tool_input = {"query": "a long query that spans several json deltas", "limit": 5}
        fake_messages_api.enqueue(F.tool_use("search", tool_input, id="toolu_s", text="On it."))
        async with (
            client_for(fake_messages_api) as client,
            client.messages.stream(**ASK) as stream,
        ):
            message = await stream.get_final_message()

        assert message.stop_reason == "tool_use"
        call = message.content[1]
        assert isinstance(call, anthropic.types.ToolUseBlock)
        assert (call.id, call.name, call.input) == ("toolu_s", "search", tool_input)

    async def test_mid_stream_error_raises(self, fake_messages_api: FakeMessagesAPI) -> None:
        """An `error` event after some events raises, with the error body, after partial text."""
        fake_messages_api.enqueue(F.stream_error(F.text("partial answer"), after_events=4))
        pieces: list[str] = []

        async def read_stream(client: anthropic.AsyncAnthropic) -> None:
            async with client.messages.stream(**ASK) as stream:
                async for piece in stream.text_stream:
                    pieces.append(piece)

        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.APIStatusError) as caught:
                await read_stream(client)

        assert pieces == ["partial "]
        assert caught.value.body == {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        }

    async def test_stream_error_needs_a_streaming_request(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Scripting a stream error for a plain request is a script bug, answered 500 and kept."""
        fake_messages_api.enqueue(F.stream_error())
        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.InternalServerError, match="does not stream"):
                await client.messages.create(**ASK)
        with pytest.raises(AssertionError, match="does not stream"):
            fake_messages_api.check()

    async def test_errors_before_the_stream_are_plain_http_errors(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """An error reply to a streaming request is an HTTP error, as with the real API."""
        fake_messages_api.enqueue(F.error(429, retry_after=1))
        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.RateLimitError):
                async with client.messages.stream(**ASK) as stream:
                    await stream.get_final_message()


class TestScript:
    async def test_exhausted_script_answers_500_and_is_recorded(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A request beyond the script gets a 500 saying so, and check() fails the test."""
        fake_messages_api.enqueue(F.text("only one"))
        async with client_for(fake_messages_api) as client:
            await client.messages.create(**ASK)
            with pytest.raises(anthropic.InternalServerError, match="script exhausted"):
                await client.messages.create(**ASK)

        assert fake_messages_api.pending == 0
        assert len(fake_messages_api.problems) == 1
        with pytest.raises(AssertionError, match="script exhausted: request #1"):
            fake_messages_api.check()
        assert fake_messages_api.problems == []

    async def test_handler_answers_once_the_queue_is_empty(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Queued replies come first, then the handler answers from the request."""

        def echo(request: RecordedRequest) -> Reply:
            return F.text(f"echo: {request.messages[-1]['content']}")

        fake_messages_api.enqueue(F.error(529))
        fake_messages_api.handler = echo
        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.OverloadedError):
                await client.messages.create(**ASK)
            message = await client.messages.create(**ASK)

        assert message.content[0].type == "text"
        assert message.content[0].text == "echo: hi"

    async def test_handler_that_raises_is_a_recorded_500(self) -> None:
        """A failing handler does not crash the server: 500 to the client, a problem to check."""

        def broken(request: RecordedRequest) -> Reply:
            raise KeyError("oops")

        with FakeMessagesAPI(handler=broken) as api:
            async with client_for(api) as client:
                with pytest.raises(anthropic.InternalServerError, match="handler raised"):
                    await client.messages.create(**ASK)
        assert api.problems == [
            "FakeMessagesAPI handler raised on request #0 (POST /v1/messages): KeyError('oops')"
        ]

    async def test_concurrent_requests_each_take_one_reply(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Concurrent requests take distinct queued replies, and every one is recorded."""
        fake_messages_api.enqueue(*(F.text(f"reply {i}") for i in range(20)))
        async with client_for(fake_messages_api) as client:
            messages = await asyncio.gather(*(client.messages.create(**ASK) for _ in range(20)))

        texts = {m.content[0].text for m in messages if m.content[0].type == "text"}
        assert texts == {f"reply {i}" for i in range(20)}
        assert sorted(r.index for r in fake_messages_api.requests) == list(range(20))
        assert len({r.request_id for r in fake_messages_api.requests}) == 20


class TestRecording:
    async def test_requests_are_recorded(self, fake_messages_api: FakeMessagesAPI) -> None:
        """Each request keeps its path, headers and parsed body, in arrival order."""
        fake_messages_api.enqueue(F.text("one"), F.text("two"))
        async with client_for(fake_messages_api) as client:
            await client.messages.create(**ASK, system="be brief")
            await client.messages.create(**{**ASK, "model": "claude-other"})

        first, second = fake_messages_api.requests
        assert fake_messages_api.request_count == 2
        assert (first.method, first.path, first.index) == ("POST", "/v1/messages", 0)
        assert first.body["system"] == "be brief"
        assert first.messages == [{"role": "user", "content": "hi"}]
        assert (first.model, second.model) == ("claude-test", "claude-other")
        assert first.headers["content-type"] == "application/json"
        assert "anthropic-version" in first.headers
        assert not first.stream

    async def test_sdk_api_key_is_recorded(self, fake_messages_api: FakeMessagesAPI) -> None:
        """The key given to the SDK is seen by the server, and assert_authenticated checks it."""
        fake_messages_api.enqueue(F.text("ok"))
        async with client_for(fake_messages_api, api_key="sk-ant-secret") as client:
            await client.messages.create(**ASK)

        assert fake_messages_api.requests[0].api_key == "sk-ant-secret"
        fake_messages_api.assert_authenticated("sk-ant-secret")
        with pytest.raises(AssertionError, match="another API key"):
            fake_messages_api.assert_authenticated("sk-ant-other")

    def test_x_api_key_header(self, fake_messages_api: FakeMessagesAPI) -> None:
        """A key sent as the x-api-key header is accepted."""
        fake_messages_api.enqueue(F.text("ok"))
        headers = {"x-api-key": "sk-ant-header", "content-type": "application/json"}
        status, body = raw_post(
            fake_messages_api, "/v1/messages", json.dumps(ASK).encode(), headers
        )

        assert (status, body["type"]) == (200, "message")
        request = fake_messages_api.requests[0]
        assert (request.auth_scheme, request.api_key) == ("x-api-key", "sk-ant-header")

    async def test_bearer_auth(self, fake_messages_api: FakeMessagesAPI) -> None:
        """An auth token arrives as Authorization: Bearer and is accepted too."""
        fake_messages_api.enqueue(F.text("ok"))
        async with client_for(fake_messages_api, api_key=None, auth_token="oauth-token") as client:
            await client.messages.create(**ASK)

        request = fake_messages_api.requests[0]
        assert (request.auth_scheme, request.api_key) == ("bearer", "oauth-token")
        fake_messages_api.assert_authenticated()

    def test_missing_auth_is_401(self, fake_messages_api: FakeMessagesAPI) -> None:
        """Without credentials the answer is 401 authentication_error; no reply is consumed."""
        fake_messages_api.enqueue(F.text("never sent"))
        status, body = raw_post(
            fake_messages_api,
            "/v1/messages",
            json.dumps(ASK).encode(),
            {"content-type": "application/json"},
        )

        assert status == 401
        assert body["error"]["type"] == "authentication_error"
        assert fake_messages_api.pending == 1
        assert fake_messages_api.requests[0].auth_scheme is None
        with pytest.raises(AssertionError, match="carried no API key"):
            fake_messages_api.assert_authenticated()
        with pytest.raises(AssertionError, match="no requests"):
            FakeMessagesAPI().assert_authenticated()

    async def test_expected_api_key_rejects_others(self) -> None:
        """Given an api_key, the server answers 401 to any other key."""
        with FakeMessagesAPI(F.text("ok"), api_key="sk-ant-right") as api:
            async with client_for(api, api_key="sk-ant-wrong") as client:
                with pytest.raises(anthropic.AuthenticationError):
                    await client.messages.create(**ASK)
            async with client_for(api, api_key="sk-ant-right") as client:
                await client.messages.create(**ASK)

    async def test_other_paths_are_404(self, fake_messages_api: FakeMessagesAPI) -> None:
        """Endpoints other than POST /v1/messages are 404 not_found_error, and recorded."""
        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.NotFoundError):
                await client.messages.count_tokens(model="claude-test", messages=ASK["messages"])

        assert fake_messages_api.requests[0].path == "/v1/messages/count_tokens"
        assert fake_messages_api.problems == []

    def test_body_that_is_not_json_is_400(self, fake_messages_api: FakeMessagesAPI) -> None:
        """A request body that is not JSON is answered 400 invalid_request_error."""
        status, body = raw_post(fake_messages_api, "/v1/messages", b"{oops", {"x-api-key": "k"})

        assert (status, body["error"]["type"]) == (400, "invalid_request_error")
        assert fake_messages_api.requests[0].raw_body == b"{oops"
        assert fake_messages_api.requests[0].body is None


class TestLifecycle:
    def test_sync_client_and_context_manager(self) -> None:
        """The server runs in its own thread: a sync client works without any event loop."""
        with FakeMessagesAPI(F.text("sync")) as api:
            assert api.base_url.startswith("http://127.0.0.1:")
            with anthropic.Anthropic(api_key="k", base_url=api.base_url, max_retries=0) as client:
                message = client.messages.create(**ASK)
        assert message.content[0].type == "text"
        assert "closed" in repr(api)

    def test_misuse_is_a_usage_error(self) -> None:
        """No base_url before start, no restart; close twice is harmless."""
        api = FakeMessagesAPI()
        with pytest.raises(UsageError, match="before start"):
            _ = api.base_url
        api.start()
        with pytest.raises(UsageError, match="started once"):
            api.start()
        api.close()
        api.close()
        with pytest.raises(UsageError, match="started once"):
            api.start()

    def test_each_server_gets_its_own_port(self) -> None:
        """Two servers run side by side on different free ports."""
        with FakeMessagesAPI() as one, FakeMessagesAPI() as two:
            assert one.base_url != two.base_url


class TestPytestPlugin:
    def test_fixture_comes_from_the_entry_point(self, pytester: pytest.Pytester) -> None:
        """The plugin is found through its entry point; unchecked problems fail at teardown."""
        pytester.makepyfile(
            """
            import json, urllib.request

            def test_uses_fixture(fake_messages_api):
                assert fake_messages_api.base_url.startswith("http://127.0.0.1:")

            def test_exhausts_script(fake_messages_api):
                request = urllib.request.Request(
                    fake_messages_api.base_url + "/v1/messages",
                    data=json.dumps({"model": "m", "messages": []}).encode(),
                    headers={"x-api-key": "k", "content-type": "application/json"},
                )
                try:
                    urllib.request.urlopen(request).close()
                except urllib.error.HTTPError as error:
                    error.close()
            """
        )
        pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider")

        result.assert_outcomes(passed=2, errors=1)
        result.stdout.fnmatch_lines(["*script exhausted*"])
