"""Model strings ("anthropic:claude-sonnet-4-5", "bedrock:...", "google:..."): what each
builds, every place that takes a model takes one, and each bad string's `UsageError`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anthropic
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from agentmesh import Success, UsageError
from agentmesh.coordinator import LLMRewriter, LLMSynthesizer
from agentmesh.models import (
    AnthropicModel,
    FallbackModel,
    GeminiModel,
    ScriptedModel,
    resolve_model,
)
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeGeminiAPI, FakeMessagesAPI

F = FakeMessagesAPI
BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.fixture
def anthropic_environment(
    fake_messages_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> FakeMessagesAPI:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    return fake_messages_api


@pytest.fixture
def bedrock_environment(
    fake_messages_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> FakeMessagesAPI:
    """Bedrock as the SDK finds it from the environment alone, on loopback."""
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEEXAMPLE0002")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", fake_messages_api.base_url)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    return fake_messages_api


class TestForms:
    async def test_anthropic_is_an_anthropic_model_that_answers(
        self, anthropic_environment: FakeMessagesAPI
    ) -> None:
        anthropic_environment.enqueue(F.text("hi"))
        async with resolve_model("anthropic:claude-sonnet-4-5") as model:
            assert isinstance(model, AnthropicModel)
            outcome = await LLMSubagent("a", model).run("hello")
        assert isinstance(outcome, Success)
        assert anthropic_environment.requests[0].model == "claude-sonnet-4-5"

    async def test_bedrock_is_claude_on_bedrock_signed_from_the_environment(
        self, bedrock_environment: FakeMessagesAPI
    ) -> None:
        bedrock_environment.enqueue(F.text("from Bedrock"))
        model = resolve_model(f"bedrock:{BEDROCK_MODEL}")
        assert isinstance(model, AnthropicModel)
        assert (model.name, model.provider) == (BEDROCK_MODEL, "aws.bedrock")
        async with model:
            outcome = await LLMSubagent("a", model).run("hello")
        assert isinstance(outcome, Success)
        assert outcome.data == "from Bedrock"
        (request,) = bedrock_environment.requests
        assert request.path == f"/model/{BEDROCK_MODEL}/invoke"
        assert request.auth_scheme == "sigv4"
        # The model built its client, so closing the model closed it; the next call
        # builds another for the same platform, never Anthropic's API.
        assert (model.provider, model.endpoint) == ("aws.bedrock", bedrock_environment.base_url)
        bedrock_environment.enqueue(F.text("again"))
        async with model:
            await model.create(messages=[{"role": "user", "content": "hi"}])
        assert bedrock_environment.requests[-1].path == f"/model/{BEDROCK_MODEL}/invoke"

    async def test_bedrock_with_a_bedrock_api_key_needs_no_signature(
        self, bedrock_environment: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-fake")
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            monkeypatch.delenv(name)
        bedrock_environment.enqueue(F.text("keyed"))
        async with resolve_model(f"bedrock:{BEDROCK_MODEL}") as model:
            await model.create(messages=[{"role": "user", "content": "hi"}])
        assert bedrock_environment.requests[0].api_key == "bedrock-api-key-fake"

    async def test_vertex_calls_with_the_token_google_s_default_credentials_buy(
        self,
        fake_messages_api: FakeMessagesAPI,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
    ) -> None:
        """A service account's key file (GOOGLE_APPLICATION_CREDENTIALS) whose token_uri is
        the fake's: google-auth signs its JWT, buys a token, and Vertex is called with it."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        account = {
            "type": "service_account",
            "project_id": "key-project",
            "private_key_id": "1",
            "private_key": pem.decode(),
            "client_email": "agent@key-project.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": f"{fake_messages_api.base_url}/oauth2/token",
        }
        (tmp_path / "key.json").write_text(json.dumps(account))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "key.json"))
        monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
        monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "my-project")
        monkeypatch.setenv("ANTHROPIC_VERTEX_BASE_URL", f"{fake_messages_api.base_url}/v1")
        fake_messages_api.enqueue(F.text("from Vertex"))
        async with resolve_model("vertex:claude-sonnet-4-5@20250929") as model:
            outcome = await LLMSubagent("a", model).run("hello")
        assert isinstance(outcome, Success)
        token, call = fake_messages_api.requests
        assert token.path == "/oauth2/token"
        assert call.path == (
            "/v1/projects/my-project/locations/us-east5/publishers/anthropic/"
            "models/claude-sonnet-4-5@20250929:rawPredict"
        )
        assert call.api_key == "ya29.fake-0"

    def test_vertex_is_claude_on_vertex_in_the_environment_s_region(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Built without touching the network; Google's credentials load at the first call."""
        monkeypatch.setenv("CLOUD_ML_REGION", "europe-west1")
        monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "my-project")
        monkeypatch.delenv("ANTHROPIC_VERTEX_BASE_URL", raising=False)
        model = resolve_model("vertex:claude-sonnet-4-5@20250929")
        assert isinstance(model, AnthropicModel)
        assert (model.name, model.provider) == ("claude-sonnet-4-5@20250929", "gcp.vertex_ai")
        assert isinstance(model._client, anthropic.AsyncAnthropicVertex)
        assert model.endpoint == "https://europe-west1-aiplatform.googleapis.com/v1"

    async def test_google_calls_the_base_url_the_sdk_reads_from_the_environment(
        self, fake_gemini_api: FakeGeminiAPI, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A google string takes no URL: the SDK's GOOGLE_GEMINI_BASE_URL points it at one
        (a gateway, here the fake), and the model's health is kept under that endpoint."""
        monkeypatch.setenv("GOOGLE_API_KEY", "gemini-from-the-environment")
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake_gemini_api.base_url)
        fake_gemini_api.enqueue(FakeGeminiAPI.text("hello from Gemini"))
        async with resolve_model("google:gemini-2.5-flash") as model:
            assert isinstance(model, GeminiModel)
            assert model.name == "gemini-2.5-flash"
            assert model.endpoint == fake_gemini_api.base_url.rstrip("/")
            outcome = await LLMSubagent("a", model).run("hi")
        assert isinstance(outcome, Success)
        assert outcome.data == "hello from Gemini"
        assert fake_gemini_api.requests[0].model == "gemini-2.5-flash"

    def test_a_model_is_returned_as_it_is(self) -> None:
        model = ScriptedModel([])
        assert resolve_model(model) is model


class TestEveryPlaceTakesAString:
    def test_subagent_fallback_rewriter_and_synthesizer(
        self, anthropic_environment: FakeMessagesAPI
    ) -> None:
        chain = FallbackModel("anthropic:claude-sonnet-4-5", "anthropic:claude-haiku-4-5")
        assert [model.name for model in chain.models] == ["claude-sonnet-4-5", "claude-haiku-4-5"]
        assert isinstance(LLMSubagent("a", "anthropic:claude-haiku-4-5").model, AnthropicModel)
        assert LLMRewriter("anthropic:claude-haiku-4-5").model.name == "claude-haiku-4-5"
        assert LLMSynthesizer("anthropic:claude-haiku-4-5").model.name == "claude-haiku-4-5"


class TestBadStrings:
    @pytest.mark.parametrize(
        ("spec", "says"),
        [
            ("mistral:large", "names no known provider"),
            ("claude-sonnet-4-5", 'perhaps "anthropic:claude-sonnet-4-5"'),
            ("anthropic:", "names no model"),
            ("bedrock:  ", "names no model"),
            ("openai-compatible:llama3.1", "needs its base URL"),
            ("openai-compatible:@http://localhost:11434/v1", "names no model"),
        ],
    )
    def test_each_says_what_is_wrong(self, spec: str, says: str) -> None:
        with pytest.raises(UsageError, match=re.escape(says)):
            resolve_model(spec)

    def test_not_a_model_at_all(self) -> None:
        with pytest.raises(UsageError, match="expected a Model or a model string"):
            LLMSubagent("a", 42)  # type: ignore[arg-type]

    def test_a_bad_string_in_a_fallback_chain(self) -> None:
        with pytest.raises(UsageError, match="names no known provider"):
            FallbackModel("anthropic:claude-sonnet-4-5", "nope:x")

    def test_bedrock_without_a_region_names_the_variable(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
        with pytest.raises(UsageError, match=r"Claude on bedrock: .*AWS_REGION"):
            resolve_model(f"bedrock:{BEDROCK_MODEL}")

    def test_vertex_without_a_region_names_the_variable(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("CLOUD_ML_REGION", raising=False)
        monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "my-project")
        with pytest.raises(UsageError, match=r"Claude on vertex: .*CLOUD_ML_REGION"):
            resolve_model("vertex:claude-sonnet-4-5@20250929")

    def test_vertex_without_a_project_names_the_variable(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
        monkeypatch.delenv("ANTHROPIC_VERTEX_PROJECT_ID", raising=False)
        with pytest.raises(UsageError, match="ANTHROPIC_VERTEX_PROJECT_ID"):
            resolve_model("vertex:claude-sonnet-4-5@20250929")

    @pytest.mark.parametrize(
        ("spec", "blocked", "extra"),
        [
            (f"bedrock:{BEDROCK_MODEL}", "botocore", "bedrock"),
            ("vertex:claude-sonnet-4-5@20250929", "google.auth", "vertex"),
            ("openai:gpt-5-mini", "openai", "openai"),
            ("google:gemini-2.5-flash", "google.genai", "google"),
        ],
    )
    def test_a_provider_whose_sdk_is_missing_names_the_extra(
        self, spec: str, blocked: str, extra: str, tmp_path: Path
    ) -> None:
        """In a fresh interpreter where the SDK cannot be imported."""
        script = (
            "import sys, importlib.abc\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name == {blocked!r} or name.startswith({blocked + '.'!r}):\n"
            "            raise ModuleNotFoundError(name=name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from agentmesh.models import resolve_model\n"
            "from agentmesh.errors import UsageError\n"
            "try:\n"
            f"    resolve_model({spec!r})\n"
            "except UsageError as exc:\n"
            "    print(exc)\n"
        )
        env = {"AWS_REGION": "us-east-1", "CLOUD_ML_REGION": "us-east5", "PATH": ""}
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**env, "PYTHONPATH": str(Path(__file__).parents[2])},
            check=True,
            cwd=tmp_path,
        )
        assert f"pip install 'agentmesh-failwell[{extra}]'" in done.stdout, done.stderr


def test_importing_agentmesh_imports_no_provider_sdk() -> None:
    """Model strings name providers by module path: nothing is imported until one is used."""
    script = (
        "import sys, agentmesh, agentmesh.models, agentmesh.subagents, agentmesh.coordinator\n"
        "sdks = ('anthropic', 'openai', 'google.genai', 'google.auth', 'botocore')\n"
        "print([name for name in sdks if name in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(Path(__file__).parents[2]), "PATH": ""},
        check=True,
    )
    assert done.stdout.strip() == "[]", done.stderr
