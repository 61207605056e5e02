"""Provider keys are masked by their shape alone, in text that names no key, token or
secret: a log line or an event holding `sk-proj-...` or `AIza...` and nothing else."""

from __future__ import annotations

import pytest

from agentmesh._redaction import redact, redact_data, redact_text

KEYS = [
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
    "sk-proj-Abc123_def456-GHI789jkl012MNO345",
    "AIzaSyA1234567890abcdefghijklmnopqrstuv",
]


@pytest.mark.parametrize("key", KEYS)
def test_a_key_in_plain_words_is_masked(key: str) -> None:
    assert key not in redact_text(f"the call used {key} and failed")


@pytest.mark.parametrize("key", KEYS)
def test_a_key_in_a_value_is_masked_at_rest_and_in_what_leaves(key: str) -> None:
    assert key not in str(redact_data({"note": f"copied {key} here"}))
    assert key not in str(redact({"query": f"why does {key} fail?"}))


def test_text_without_a_key_shape_is_left_as_it_is() -> None:
    text = "ask-me-anything: a risk-free sk-like word"
    assert redact_text(text) == text
