"""The Chat Completions translation: Anthropic-shaped conversations in, answers back."""

from __future__ import annotations

from typing import Any

import pytest

from agentmesh import UsageError
from agentmesh.models import ModelResponse, TextBlock, ToolUseBlock
from agentmesh.models._chat_completions import (
    CONTENT_FILTERED,
    ChunkFold,
    Malformed,
    chat_messages,
    chat_tool_choice,
    chat_tools,
    response_of,
)


def completion(message: dict[str, Any], finish: str | None = "stop", **top: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "model": "m",
        **top,
        "choices": [{"message": message, "finish_reason": finish}],
    }


class TestMessages:
    def test_tool_results_come_first_as_tool_messages_then_the_users_text(self) -> None:
        """A `tool` message must follow the assistant's calls; the user's words come after."""
        messages = chat_messages(
            None,
            [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "x"},
                        {"type": "text", "text": "Looking."},
                        {"type": "tool_use", "id": "c1", "name": "a", "input": {"x": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "also this"},
                        {
                            "type": "tool_result",
                            "tool_use_id": "c1",
                            "content": [
                                {"type": "text", "text": "one"},
                                {"type": "text", "text": "two"},
                            ],
                        },
                    ],
                },
            ],
        )
        assert messages[1] == {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "a", "arguments": '{"x":1}'}}
            ],
        }
        assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "one\ntwo"}
        assert messages[3] == {"role": "user", "content": "also this"}

    def test_an_assistant_turn_of_only_calls_has_null_content(self) -> None:
        [message] = chat_messages(
            None, [{"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "a"}]}]
        )
        assert message["content"] is None
        assert message["tool_calls"][0]["function"]["arguments"] == "{}"

    def test_images_become_image_url_parts(self) -> None:
        [message] = chat_messages(
            None,
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is this?"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAA"},
                        },
                        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    ],
                }
            ],
        )
        assert message["content"] == [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAA"}},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        ]

    @pytest.mark.parametrize(
        "message",
        [{"role": "system", "content": "x"}, {"role": "user", "content": [{"type": "document"}]}],
        ids=["role", "block"],
    )
    def test_what_has_no_chat_completions_form_is_a_usage_error(self, message: Any) -> None:
        with pytest.raises(UsageError):
            chat_messages(None, [message])


class TestToolsAndChoice:
    def test_a_server_tool_without_a_schema_is_a_usage_error(self) -> None:
        with pytest.raises(UsageError, match="web_search"):
            chat_tools([{"type": "web_search_20250305", "name": "web_search"}])

    @pytest.mark.parametrize(
        ("choice", "expected"),
        [
            ({"type": "auto"}, ("auto", None)),
            ({"type": "any"}, ("required", None)),
            ({"type": "none"}, ("none", None)),
            (
                {"type": "tool", "name": "f"},
                ({"type": "function", "function": {"name": "f"}}, None),
            ),
            ({"type": "auto", "disable_parallel_tool_use": True}, ("auto", False)),
        ],
    )
    def test_tool_choice(self, choice: dict[str, Any], expected: tuple[Any, Any]) -> None:
        assert chat_tool_choice(choice) == expected

    def test_an_unknown_tool_choice_is_a_usage_error(self) -> None:
        with pytest.raises(UsageError):
            chat_tool_choice({"type": "sometimes"})


class TestAnswers:
    @pytest.mark.parametrize(
        ("finish", "stop_reason"),
        [
            ("stop", "end_turn"),
            ("length", "max_tokens"),
            ("eos", "end_turn"),
            ("tool_calls", "tool_use"),
        ],
    )
    def test_finish_reasons(self, finish: str, stop_reason: str) -> None:
        response = response_of(completion({"content": "hi"}, finish))
        assert response.stop_reason == stop_reason
        assert response.content == (TextBlock(text="hi"),)

    def test_a_content_filter_stop_is_a_refusal_saying_so(self) -> None:
        response = response_of(completion({"content": "partial"}, "content_filter"))
        assert (response.stop_reason, response.text) == ("refusal", CONTENT_FILTERED)

    def test_usage_splits_cached_input_and_shows_reasoning(self) -> None:
        usage = {
            "prompt_tokens": 50,
            "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 30},
            "completion_tokens_details": {"reasoning_tokens": 12},
        }
        response = response_of(completion({"content": "hi"}, usage=usage))
        assert response.usage.input_tokens == 20
        assert response.usage.cache_read_input_tokens == 30
        assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (20, 12)

    def test_a_compatible_server_s_bare_usage_is_read(self) -> None:
        """No details objects (vLLM, Ollama): nothing cached, no reasoning."""
        usage = {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": None}
        response = response_of(completion({"content": "hi"}, usage=usage))
        assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 2)
        assert response.usage.unusable == ()

    @pytest.mark.parametrize(
        "body",
        [
            None,
            {"choices": []},
            {"choices": [{"finish_reason": "stop"}]},
            completion({"content": "x"}, None),
            completion(
                {"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}]}
            ),
            completion({"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}),
        ],
        ids=["null", "no-choices", "no-message", "no-finish", "arguments-not-object", "no-name"],
    )
    def test_what_is_no_chat_completion_is_malformed(self, body: Any) -> None:
        with pytest.raises(Malformed):
            response_of(body)


class TestChunkFold:
    def test_deltas_fold_into_text_calls_finish_and_usage(self) -> None:
        fold = ChunkFold()
        for chunk in [
            {
                "id": "c1",
                "model": "m",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
            },
            {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
            {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "call_1",
                                    "function": {"name": "f", "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            },
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]},
                    }
                ]
            },
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
                    }
                ]
            },
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        ]:
            fold.add(chunk)
        response = response_of(fold.completion())
        assert response == ModelResponse(
            content=(TextBlock(text="Hello"), ToolUseBlock(id="call_1", name="f", input={"a": 1})),
            stop_reason="tool_use",
            usage=response.usage,
            model="m",
            id="c1",
        )
        assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 4)

    def test_a_stream_cut_before_its_finish_is_malformed(self) -> None:
        fold = ChunkFold()
        fold.add({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})
        with pytest.raises(Malformed, match="finish"):
            response_of(fold.completion())
