"""Model prices: what a token costs, so that usage has a cost in US dollars.

`DEFAULT_PRICES` holds Anthropic's list prices per million tokens (cache writes at the
5-minute rate), Google's and OpenAI's at the time of writing; check them against
https://docs.anthropic.com/en/docs/about-claude/pricing,
https://ai.google.dev/gemini-api/docs/pricing and
https://platform.openai.com/docs/pricing, and give a run your own with
`Coordinator(prices=...)`, which override or extend these. A model is priced by its
exact name, or as a dated snapshot of a name in the table (`claude-sonnet-4-5-20250929`
is `claude-sonnet-4-5`, `gpt-4o-mini-2024-07-18` is `gpt-4o-mini`). Any other model has
no price: its cost is None, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from agentmesh._numbers import number
from agentmesh.errors import UsageError

__all__ = ["DEFAULT_PRICES", "ModelPrice", "PriceTable"]

# A dated snapshot: Anthropic's `-20250929`, OpenAI's `-2024-07-18`.
_SNAPSHOT: Final = re.compile(r"(.+)-(?:\d{8}|\d{4}-\d{2}-\d{2})")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """US dollars per million tokens of each kind."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def __post_init__(self) -> None:
        for name in ("input", "output", "cache_write", "cache_read"):
            number(f"ModelPrice({name}=)", getattr(self, name))

    def cost(
        self, input_tokens: int, output_tokens: int, cache_creation: int, cache_read: int
    ) -> float:
        """The cost in US dollars of these tokens."""
        return (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_creation * self.cache_write
            + cache_read * self.cache_read
        ) / 1_000_000


_OPUS_4 = ModelPrice(input=15.0, output=75.0, cache_write=18.75, cache_read=1.5)
_OPUS_4_5 = ModelPrice(input=5.0, output=25.0, cache_write=6.25, cache_read=0.5)
_SONNET = ModelPrice(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3)
_HAIKU_4_5 = ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.1)
_HAIKU_3_5 = ModelPrice(input=0.8, output=4.0, cache_write=1.0, cache_read=0.08)
_HAIKU_3 = ModelPrice(input=0.25, output=1.25, cache_write=0.3, cache_read=0.03)


def _openai(input: float, output: float, cached: float) -> ModelPrice:
    return ModelPrice(input=input, output=output, cache_write=input, cache_read=cached)


DEFAULT_PRICES: Final[Mapping[str, ModelPrice]] = MappingProxyType(
    {
        "claude-opus-4-5": _OPUS_4_5,
        "claude-opus-4-1": _OPUS_4,
        "claude-opus-4": _OPUS_4,
        "claude-sonnet-4-5": _SONNET,
        "claude-sonnet-4": _SONNET,
        "claude-3-7-sonnet": _SONNET,
        "claude-haiku-4-5": _HAIKU_4_5,
        "claude-3-5-haiku": _HAIKU_3_5,
        "claude-3-haiku": _HAIKU_3,
        # Google's Gemini API list prices (https://ai.google.dev/gemini-api/docs/pricing,
        # paid tier, prompts up to 200k tokens, as listed in late 2025). No cache-write premium:
        # cache_write is the input price, cache_read the context-caching price.
        "gemini-2.5-pro": ModelPrice(input=1.25, output=10.0, cache_write=1.25, cache_read=0.125),
        "gemini-2.5-flash": ModelPrice(input=0.30, output=2.50, cache_write=0.30, cache_read=0.03),
        "gemini-2.5-flash-lite": ModelPrice(
            input=0.10, output=0.40, cache_write=0.10, cache_read=0.01
        ),
        # OpenAI, https://platform.openai.com/docs/pricing (standard tier, as listed in late
        # 2025): no cache-write premium (cache_write = input), cache_read its cached-input price.
        "gpt-5": _openai(1.25, 10.0, 0.125),
        "gpt-5-mini": _openai(0.25, 2.0, 0.025),
        "gpt-5-nano": _openai(0.05, 0.40, 0.005),
        "gpt-4.1": _openai(2.0, 8.0, 0.5),
        "gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
        "gpt-4o": _openai(2.5, 10.0, 1.25),
        "gpt-4o-mini": _openai(0.15, 0.60, 0.075),
        "o3": _openai(2.0, 8.0, 0.5),
        "o4-mini": _openai(1.10, 4.40, 0.275),
    }
)
"""Anthropic's, Google's and OpenAI's list prices, per million tokens, by model name (see
the module docstring)."""


class PriceTable:
    """The prices of a run: `DEFAULT_PRICES` with the user's own on top.

    Args:
        prices: model name -> `ModelPrice`; these override or extend the defaults.
        defaults: whether the defaults apply at all (False: only `prices`).
    """

    __slots__ = ("_prices",)

    def __init__(
        self, prices: Mapping[str, ModelPrice] | None = None, *, defaults: bool = True
    ) -> None:
        table = dict(DEFAULT_PRICES) if defaults else {}
        for name, price in (prices or {}).items():
            if not isinstance(name, str) or not isinstance(price, ModelPrice):
                raise UsageError(
                    f"prices= maps model names to ModelPrice values, got {name!r}: {price!r}"
                )
            table[name] = price
        self._prices = table

    def price_of(self, model: str) -> ModelPrice | None:
        """The model's price, by exact name or dated snapshot; None when unknown."""
        price = self._prices.get(model)
        if price is not None:
            return price
        # Only a dated snapshot of a known model: `claude-opus-4-6` is not `claude-opus-4`.
        snapshot = _SNAPSHOT.fullmatch(model)
        return None if snapshot is None else self._prices.get(snapshot.group(1))

    def __repr__(self) -> str:
        return f"<PriceTable of {len(self._prices)} models>"
