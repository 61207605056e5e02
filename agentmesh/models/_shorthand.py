"""`resolve_model`: a model named by a string, `"<provider>:<model>"`.

    anthropic:claude-sonnet-4-5                     AnthropicModel
    bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0
                                                    AnthropicModel on Amazon Bedrock
    vertex:claude-sonnet-4-5@20250929               AnthropicModel on Google Vertex AI
    openai:gpt-5-mini                               OpenAIModel
    openai-compatible:llama3.1@http://localhost:11434/v1
                                                    OpenAIModel on that base URL
    google:gemini-2.5-flash                         GeminiModel

Keys, regions and projects come from the environment, as each SDK reads them. The
provider modules are imported by name only when a string names them, so this module
imports no SDK, and a provider whose SDK is not installed is a `UsageError` naming the
pip extra that brings it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from dataclasses import dataclass
from typing import Any, Final

from agentmesh.errors import UsageError
from agentmesh.models._base import Model

__all__ = ["resolve_model"]

_DISTRIBUTION: Final = "agentmesh-failwell"
# `<model>@<base URL>`: the URL starts at the last `@` followed by a scheme.
COMPATIBLE_KEY_ENV: Final = "OPENAI_COMPATIBLE_API_KEY"
"""The key an `openai-compatible:` model sends its server (none when unset): never
`OPENAI_API_KEY`, which is OpenAI's."""
_AT_URL: Final = re.compile(r"(?P<model>.*)@(?P<url>https?://\S+)")


@dataclass(frozen=True, slots=True)
class _Provider:
    module: str
    """The agentmesh module of the model class (or of the factory)."""
    attribute: str
    sdk: str | None
    """A module the provider cannot work without; None: always installed."""
    extra: str | None
    """The pip extra that installs `sdk`."""


_PROVIDERS: Final[dict[str, _Provider]] = {
    "anthropic": _Provider("agentmesh.models._anthropic", "AnthropicModel", None, None),
    "bedrock": _Provider("agentmesh.models._anthropic", "claude_on", "botocore", "bedrock"),
    "vertex": _Provider("agentmesh.models._anthropic", "claude_on", "google.auth", "vertex"),
    "openai": _Provider("agentmesh.models._openai", "OpenAIModel", "openai", "openai"),
    "openai-compatible": _Provider("agentmesh.models._openai", "OpenAIModel", "openai", "openai"),
    "google": _Provider("agentmesh.models._gemini", "GeminiModel", "google.genai", "google"),
}
_FORMS: Final = (
    '"anthropic:<model>", "bedrock:<model id>", "vertex:<model>", "openai:<model>", '
    '"openai-compatible:<model>@<base_url>" or "google:<model>"'
)


def resolve_model(spec: Model | str) -> Model:
    """The model `spec` names; a `Model` is returned as it is.

    Args:
        spec: a `Model`, or a string `"<provider>:<model>"`: `anthropic:`, `bedrock:`
            and `vertex:` (Claude through Anthropic's API, Amazon Bedrock or Google
            Vertex AI), `openai:`, `openai-compatible:<model>@<base_url>` (any server
            that speaks OpenAI's Chat Completions, e.g.
            `"openai-compatible:llama3.1@http://localhost:11434/v1"`) and `google:`
            (Gemini). Keys, regions and projects come from the environment.

    Raises:
        UsageError: a string of no known form, a provider whose SDK is not installed
            (the message names the pip extra), or an object that is not a `Model`.
    """
    if not isinstance(spec, str):
        if callable(getattr(spec, "create", None)) and isinstance(getattr(spec, "name", None), str):
            return spec
        raise UsageError(f"expected a Model or a model string such as {_FORMS}, got {spec!r}")
    provider_name, colon, name = spec.strip().partition(":")
    provider = _PROVIDERS.get(provider_name.strip().lower())
    if not colon or provider is None:
        raise UsageError(
            f"model string {spec!r} names no known provider: write one of {_FORMS}"
            + (f' (perhaps "anthropic:{spec}")' if not colon else "")
        )
    kind = provider_name.strip().lower()
    name = name.strip()
    arguments: dict[str, Any] = {}
    if kind == "openai-compatible":
        found = _AT_URL.fullmatch(name)
        if found is None:
            raise UsageError(
                f"model string {spec!r}: an OpenAI-compatible server needs its base URL, "
                '"openai-compatible:<model>@<base_url>", e.g. '
                '"openai-compatible:llama3.1@http://localhost:11434/v1"'
            )
        name, arguments["base_url"] = found["model"], found["url"]
        # Never OPENAI_API_KEY: OpenAI's key must not go to whatever server the string
        # names. A gateway's own key comes from OPENAI_COMPATIBLE_API_KEY; a local server
        # wants none, but the SDK refuses to start without one.
        arguments["api_key"] = os.environ.get(COMPATIBLE_KEY_ENV) or "unused"
    if not name:
        raise UsageError(f"model string {spec!r} names no model after {kind + ':'!r}")
    factory = _load(kind, provider, spec)
    if provider.attribute == "claude_on":
        model: Model = factory(kind, name)
        return model
    built: Model = factory(name, **arguments)
    return built


def _load(kind: str, provider: _Provider, spec: str) -> Any:
    """The provider's model class (or factory), once its SDK is known to be installed."""
    needs_sdk = provider.sdk is not None and not (
        # A Bedrock API key is a bearer token: no SigV4 signing, no botocore.
        kind == "bedrock" and os.environ.get("AWS_BEARER_TOKEN_BEDROCK")
    )
    if needs_sdk and provider.sdk is not None and not _installed(provider.sdk):
        raise UsageError(
            f"model string {spec!r} needs the {provider.sdk} package: "
            f"pip install '{_DISTRIBUTION}[{provider.extra}]'"
        )
    try:
        module = importlib.import_module(provider.module)
    except ModuleNotFoundError as missing:
        if missing.name != provider.module:
            raise
        raise UsageError(f"model string {spec!r}: this agentmesh has no {kind!r} models") from None
    return getattr(module, provider.attribute)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package (`google`) is missing
        return False
