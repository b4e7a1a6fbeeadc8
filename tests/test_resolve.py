"""resolve_model: provider strings, objects, callables, and clear errors for the rest."""

from __future__ import annotations

from typing import Any

import pytest

from synopsis.errors import ConfigError
from synopsis.models._base import AsyncModel, Model, ModelResponse
from synopsis.models._resolve import AsyncCallableModel, CallableModel, redact_url, resolve_model
from synopsis.models.anthropic import AnthropicModel, AsyncAnthropicModel
from synopsis.models.openai import AsyncOpenAIModel, OpenAIModel
from synopsis.testing import AsyncFakeModel, FakeModel

MESSAGES = [{"role": "user", "content": "hi"}]


def test_openai_string(monkeypatch: pytest.MonkeyPatch) -> None:
    """'openai:gpt-4o-mini' builds an OpenAIModel; the SDK reads the key from the env."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = resolve_model("openai:gpt-4o-mini")
    assert isinstance(model, OpenAIModel)
    assert model.name == "openai:gpt-4o-mini"
    assert model.model == "gpt-4o-mini"
    model.close()


def test_openai_string_async_with_options() -> None:
    """async_=True gives the async twin; options reach the constructor."""
    model = resolve_model("openai:gpt-4o", async_=True, api_key="k", context_window=128_000)
    assert isinstance(model, AsyncOpenAIModel)
    assert model.context_window == 128_000


def test_openai_without_key_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """No api_key anywhere: a ConfigError that says how to fix it."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve_model("openai:gpt-4o-mini")


def test_openai_compatible_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """'openai-compatible:MODEL@URL' points the OpenAI client at that base URL, no key needed."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = resolve_model("openai-compatible:qwen2.5:7b@http://127.0.0.1:8000/v1")
    assert isinstance(model, OpenAIModel)
    assert model.model == "qwen2.5:7b"
    assert model.name == "openai-compatible:qwen2.5:7b"
    assert str(model._client.base_url).startswith("http://127.0.0.1:8000/v1")
    model.close()


def test_ollama_shortcut() -> None:
    """'ollama:MODEL' uses Ollama's default local URL."""
    model = resolve_model("ollama:llama3.2", async_=True)
    assert isinstance(model, AsyncOpenAIModel)
    assert "11434" in str(model._client.base_url)


@pytest.mark.parametrize("spec", ["openai-compatible:model-only", "openai-compatible:@http://x"])
def test_openai_compatible_needs_model_and_url(spec: str) -> None:
    """A malformed openai-compatible spec explains the expected form."""
    with pytest.raises(ConfigError, match="MODEL@BASE_URL"):
        resolve_model(spec)


def test_anthropic_string() -> None:
    """'anthropic:...' builds the Anthropic model (sync or async)."""
    model = resolve_model("anthropic:claude-sonnet-4-5", api_key="k")
    assert isinstance(model, AnthropicModel)
    assert model.name == "anthropic:claude-sonnet-4-5"
    assert isinstance(
        resolve_model("anthropic:claude", async_=True, api_key="k"), AsyncAnthropicModel
    )


def test_extractive() -> None:
    """'extractive' lazily loads the offline extractive model."""
    model = resolve_model("extractive")
    assert isinstance(model, Model)
    assert isinstance(resolve_model("extractive", async_=True), AsyncModel)


@pytest.mark.parametrize("spec", ["gemini:pro", "gpt-4o", "openai:", ""])
def test_unknown_provider_lists_known_ones(spec: str) -> None:
    """An unknown or incomplete spec names every known provider."""
    with pytest.raises(
        ConfigError, match="anthropic, extractive, ollama, openai, openai-compatible"
    ):
        resolve_model(spec)


def test_model_objects_are_returned_as_is() -> None:
    """Objects that satisfy the protocol are used unchanged."""
    sync, asynchronous = FakeModel(["x"]), AsyncFakeModel(["y"])
    assert resolve_model(sync) is sync
    assert resolve_model(asynchronous, async_=True) is asynchronous


def test_wrong_flavour_object_is_config_error() -> None:
    """An async model where a sync one is needed (and vice versa) is rejected."""
    with pytest.raises(ConfigError, match="sync model is needed"):
        resolve_model(AsyncFakeModel(["y"]))
    with pytest.raises(ConfigError, match="async model is needed"):
        resolve_model(FakeModel(["x"]), async_=True)


def test_plain_function_is_wrapped() -> None:
    """fn(messages) -> str becomes a model answering with that text."""

    def echo(messages: list[dict[str, Any]]) -> str:
        return f"{len(messages)} messages"

    model = resolve_model(echo)
    assert isinstance(model, CallableModel)
    assert model.name == "function:echo"
    response = model.complete(MESSAGES)
    assert response.text == "1 messages"
    assert response.message["role"] == "assistant"


async def test_async_function_is_wrapped() -> None:
    """An async function (or a sync one) becomes an AsyncModel with async_=True."""

    async def answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {"content": "async answer"}

    model = resolve_model(answer, async_=True)
    assert isinstance(model, AsyncCallableModel)
    assert (await model.complete(MESSAGES)).text == "async answer"
    wrapped = resolve_model(
        lambda m: ModelResponse(message={"content": "r"}, model="x"), async_=True
    )
    assert (await wrapped.complete(MESSAGES)).model == "x"


def test_async_function_for_sync_api_is_config_error() -> None:
    """An async function cannot serve the sync API."""

    async def answer(messages: list[dict[str, Any]]) -> str:
        return ""

    with pytest.raises(ConfigError):
        resolve_model(answer)


def test_bad_return_type_is_config_error() -> None:
    """A function returning something unusable fails with a clear message."""
    model = resolve_model(lambda m: 42)
    with pytest.raises(ConfigError, match="return a str"):
        model.complete(MESSAGES)


def test_non_model_object_is_config_error() -> None:
    """Something that is neither string, model nor callable is rejected."""
    with pytest.raises(ConfigError):
        resolve_model(3.14)  # type: ignore[arg-type]


# -- credentials in endpoint URLs ---------------------------------------------------------------


def test_credentials_in_the_url_never_reach_the_model_name() -> None:
    """'openai-compatible:gpt@http://user:PASS@host/v1': the model is 'gpt', the client's URL
    has no credentials, user:PASS becomes HTTP basic auth; nothing shown holds PASS."""
    model = resolve_model("openai-compatible:gpt@http://user:PASS@127.0.0.1:8000/v1")
    assert isinstance(model, OpenAIModel)
    assert (model.model, model.name) == ("gpt", "openai-compatible:gpt")
    assert str(model._client.base_url) == "http://127.0.0.1:8000/v1/"
    assert model._client.default_headers["Authorization"] == "Basic dXNlcjpQQVNT"
    assert "PASS" not in repr(model) and "user" not in model.name
    model.close()


def test_a_lone_secret_in_the_url_is_the_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """'https://KEY@host/v1' (or ':KEY@') sends KEY as the bearer API key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for url in ("https://sk-secret@example.test/v1", "https://:sk-secret@example.test/v1"):
        model = resolve_model(f"openai-compatible:qwen2.5@{url}")
        assert model._client.api_key == "sk-secret"  # type: ignore[attr-defined]
        assert str(model._client.base_url) == "https://example.test/v1/"  # type: ignore[attr-defined]
        model.close()  # type: ignore[attr-defined]


def test_a_model_id_may_contain_an_at_sign() -> None:
    """The split is at the last '@' that starts a URL, so 'org/model@v2' stays whole."""
    model = resolve_model("openai-compatible:org/model@v2@http://127.0.0.1:8000/v1", api_key="k")
    assert model.model == "org/model@v2"  # type: ignore[attr-defined]
    model.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "spec",
    [
        "openai-compatible:gpt@ftp://user:PASS@host/v1",
        "openai-compatible:gpt@user:PASS@host/v1",
        "nonsense:gpt@http://user:PASS@host/v1",
    ],
)
def test_errors_about_a_spec_never_show_its_password(spec: str) -> None:
    """A malformed spec is a ConfigError whose message has no credentials."""
    with pytest.raises(ConfigError) as info:
        resolve_model(spec)
    assert "PASS" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://user:PASS@host:8000/v1", "http://***@host:8000/v1"),
        ("https://sk-abc@api.test/v1", "https://***@api.test/v1"),
        ("http://u:p@ss@host/v1", "http://***@host/v1"),  # an unencoded '@' in the password
        ("https://host/v1?key=PASS&alt=json", "https://host/v1?key=***&alt=json"),
        (
            "error at http://a:PASS@h/v1 and http://h2/v1",
            "error at http://***@h/v1 and http://h2/v1",
        ),
        ("http://host/v1", "http://host/v1"),
    ],
)
def test_redact_url(text: str, shown: str) -> None:
    """redact_url hides the userinfo and secret query values of every URL in a text."""
    assert redact_url(text) == shown


def test_litellm_is_a_known_provider() -> None:
    """'litellm:MODEL' resolves (the unknown-provider message lists it too)."""
    from synopsis.models.litellm import AsyncLiteLLMModel, LiteLLMModel

    assert isinstance(resolve_model("litellm:gpt-4o-mini"), LiteLLMModel)
    assert isinstance(resolve_model("litellm:gpt-4o-mini", async_=True), AsyncLiteLLMModel)
    with pytest.raises(ConfigError, match="litellm"):
        resolve_model("gemini:pro")
