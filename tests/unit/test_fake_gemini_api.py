"""FakeGeminiAPI on the wire: what a raw HTTP client sees, before any SDK reads it."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from agentmesh.testing import FakeGeminiAPI, GeminiRequest

F = FakeGeminiAPI
KEY = {"x-goog-api-key": "test-key"}
GENERATE = "/v1/models/gemini-2.5-flash:generateContent"
STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def post(api: FakeGeminiAPI, path: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.post(api.base_url + path, json=BODY, headers=KEY if headers is None else headers)


def events(response: httpx2.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ]


class TestAnswers:
    def test_a_text_answer_in_the_api_shape(self, fake_gemini_api: FakeGeminiAPI) -> None:
        fake_gemini_api.enqueue(F.text("hello", prompt_tokens=3, output_tokens=2))
        body = post(fake_gemini_api, GENERATE).json()
        assert body["candidates"][0]["content"] == {"parts": [{"text": "hello"}], "role": "model"}
        assert body["candidates"][0]["finishReason"] == "STOP"
        assert body["usageMetadata"]["promptTokenCount"] == 3
        assert body["usageMetadata"]["totalTokenCount"] == 5
        assert body["modelVersion"] == "gemini-2.5-flash"
        [request] = fake_gemini_api.requests
        assert isinstance(request, GeminiRequest)
        assert (request.model, request.stream, request.api_key) == (
            "gemini-2.5-flash",
            False,
            "test-key",
        )
        assert request.contents == BODY["contents"]

    def test_a_stream_is_sse_chunks_ending_with_the_finish_reason(
        self, fake_gemini_api: FakeGeminiAPI
    ) -> None:
        fake_gemini_api.enqueue(F.text("a text of several chunks"))
        chunks = events(post(fake_gemini_api, STREAM))
        assert len(chunks) > 1
        assert "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks) == (
            "a text of several chunks"
        )
        assert [("finishReason" in c["candidates"][0]) for c in chunks][-2:] == [False, True]

    def test_a_cut_stream_has_no_finish_reason(self, fake_gemini_api: FakeGeminiAPI) -> None:
        fake_gemini_api.enqueue(F.stream_cut(F.text("a text of several chunks"), 2))
        chunks = events(post(fake_gemini_api, STREAM))
        assert len(chunks) == 2
        assert all("finishReason" not in c["candidates"][0] for c in chunks)

    def test_a_blocked_prompt_has_no_candidate(self, fake_gemini_api: FakeGeminiAPI) -> None:
        fake_gemini_api.enqueue(F.blocked_prompt("SAFETY"))
        body = post(fake_gemini_api, GENERATE).json()
        assert "candidates" not in body
        assert body["promptFeedback"] == {"blockReason": "SAFETY"}


class TestErrors:
    def test_a_rate_limit_carries_quota_failure_and_retry_info(
        self, fake_gemini_api: FakeGeminiAPI
    ) -> None:
        fake_gemini_api.enqueue(F.rate_limited(12))
        response = post(fake_gemini_api, GENERATE)
        assert response.status_code == 429
        error = response.json()["error"]
        assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
        kinds = [d["@type"].rsplit(".", 1)[1] for d in error["details"]]
        assert kinds == ["QuotaFailure", "Help", "RetryInfo"]
        assert error["details"][2]["retryDelay"] == "12s"

    def test_no_key_is_403_and_a_wrong_key_is_api_key_invalid(self) -> None:
        with FakeGeminiAPI(api_key="right") as api:
            missing = post(api, GENERATE, headers={})
            wrong = post(api, GENERATE, headers={"x-goog-api-key": "wrong"})
        assert (missing.status_code, missing.json()["error"]["status"]) == (
            403,
            "PERMISSION_DENIED",
        )
        assert wrong.status_code == 400
        assert wrong.json()["error"]["details"][0]["reason"] == "API_KEY_INVALID"

    def test_an_unknown_path_is_404(self, fake_gemini_api: FakeGeminiAPI) -> None:
        response = post(fake_gemini_api, "/v1/models/gemini-2.5-flash:countTokens")
        assert (response.status_code, response.json()["error"]["status"]) == (404, "NOT_FOUND")

    def test_overload_answers_503_before_the_script(self, fake_gemini_api: FakeGeminiAPI) -> None:
        fake_gemini_api.overload(1)
        fake_gemini_api.enqueue(F.text("after"))
        first, second = post(fake_gemini_api, GENERATE), post(fake_gemini_api, GENERATE)
        assert (
            first.json()["error"]["message"] == "The model is overloaded. Please try again later."
        )
        assert second.status_code == 200


class TestProblems:
    def test_an_exhausted_script_is_a_500_and_a_problem(self) -> None:
        with FakeGeminiAPI() as api:
            response = post(api, GENERATE)
            assert response.status_code == 500
            assert api.problems
            with pytest.raises(AssertionError, match="script exhausted"):
                api.check()
            api.check()  # taken: nothing left to report

    def test_a_handler_that_raises_is_a_problem(self) -> None:
        def broken(request: GeminiRequest) -> Any:
            raise RuntimeError("oops")

        with FakeGeminiAPI(handler=broken) as api:
            assert post(api, GENERATE).status_code == 500
        assert "handler raised" in api.problems[0]
