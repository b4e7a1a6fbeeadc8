"""The table of model limits: lookups by model id, the output budget, provider models' limits."""

from __future__ import annotations

import pytest

from synopsis.errors import ConfigError
from synopsis.models.anthropic import AnthropicModel
from synopsis.models.failover import FailoverModel
from synopsis.models.limits import (
    OUTPUT_FLOOR,
    UNKNOWN,
    ModelLimits,
    limits_for,
    output_budget,
    smallest,
)
from synopsis.models.openai import OpenAIModel
from synopsis.testing import FakeModel


@pytest.mark.parametrize(
    ("model_id", "window", "max_output"),
    [
        # OpenAI: the more specific id wins over its family
        ("gpt-4o-mini", 128_000, 16_384),
        ("gpt-4o-2024-05-13", 128_000, 4_096),
        ("gpt-4.1-nano", 1_047_576, 32_768),
        ("gpt-4-turbo", 128_000, 4_096),
        ("gpt-4-0125-preview", 128_000, 4_096),
        ("gpt-4-32k", 32_768, 8_192),
        ("gpt-4", 8_192, 8_192),
        ("gpt-3.5-turbo", 16_385, 4_096),
        ("gpt-5-mini", 400_000, 128_000),
        ("o1-mini", 128_000, 65_536),
        ("o3-mini", 200_000, 100_000),
        ("o4-mini-2025-04-16", 200_000, 100_000),
        # Anthropic, also behind a LiteLLM or Bedrock prefix
        ("claude-sonnet-4-5", 200_000, 64_000),
        ("claude-opus-4-1-20250805", 200_000, 32_000),
        ("claude-3-7-sonnet-20250219", 200_000, 64_000),
        ("anthropic/claude-3-5-sonnet-20240620", 200_000, 8_192),
        ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", 200_000, 4_096),
        # Gemini
        ("gemini-2.5-pro", 1_048_576, 65_536),
        ("gemini/gemini-1.5-pro", 2_097_152, 8_192),
        ("gemini-2.0-flash", 1_048_576, 8_192),
        # Qwen, Llama, DeepSeek, Mistral: API names, Hugging Face ids and Ollama tags
        ("qwen-plus", 131_072, 8_192),
        ("Qwen/Qwen2.5-7B-Instruct", 32_768, 8_192),
        ("qwen2.5:7b", 32_768, 8_192),
        ("meta-llama/Llama-3.1-8B-Instruct", 131_072, 8_192),
        ("llama3.2", 131_072, 8_192),
        ("llama3:8b", 8_192, 4_096),
        ("llama-2-7b-chat", 4_096, 4_096),
        ("deepseek-chat", 64_000, 8_192),
        ("deepseek-coder:6.7b", 16_384, 4_096),
        ("mistral-large-latest", 131_072, 8_192),
        ("open-mistral-nemo", 131_072, 8_192),
        ("mistral:7b", 32_768, 8_192),
        ("mixtral-8x22b", 65_536, 8_192),
        ("codestral-latest", 256_000, 8_192),
    ],
)
def test_known_models(model_id: str, window: int, max_output: int) -> None:
    """Each family's ids find their documented window and output limit."""
    assert limits_for(model_id) == ModelLimits(window, max_output)


@pytest.mark.parametrize("model_id", ["my-finetune", "local-model", "phi3", ""])
def test_unknown_models_get_the_small_default(model_id: str) -> None:
    """An id nothing matches gets 8,192 / 2,048: chunked rather than overflowed."""
    assert limits_for(model_id) == UNKNOWN == ModelLimits(8_192, 2_048)


@pytest.mark.parametrize(
    ("window", "max_output", "expected"),
    [
        (8_192, None, 2_048),  # a quarter of the window
        (128_000, 16_384, 16_384),  # the model's own limit caps the share
        (128_000, None, 32_000),
        (2_000, None, OUTPUT_FLOOR),  # never below the floor ...
        (2_000, 500, 500),  # ... unless the model allows less
    ],
)
def test_output_budget(window: int, max_output: int | None, expected: int) -> None:
    """The summary's budget: min(model max, max(floor, window / 4))."""
    assert output_budget(window, max_output) == expected


def test_smallest_ignores_unknown_values() -> None:
    """The smallest positive integer of a chain; None when nobody declares one."""
    assert smallest([None, 8_000, 4_000, 0, True]) == 4_000
    assert smallest([None, "x"]) is None


def test_provider_models_know_their_limits() -> None:
    """Provider models fill context_window and max_output_tokens from the table unless given."""
    model = OpenAIModel("gpt-4o-mini", api_key="k")
    assert (model.context_window, model.max_output_tokens) == (128_000, 16_384)
    local = OpenAIModel("my-local-model", api_key="k", base_url="http://127.0.0.1:1/v1")
    assert (local.context_window, local.max_output_tokens) == (8_192, 2_048)
    given = AnthropicModel("claude-opus-4", api_key="k", context_window=50_000, max_output_tokens=7)
    assert (given.context_window, given.max_output_tokens) == (50_000, 7)
    for made in (model, local, given):
        made.close()


@pytest.mark.parametrize("option", ["context_window", "max_output_tokens"])
def test_provider_limits_must_be_positive(option: str) -> None:
    """A zero or negative limit is a ConfigError naming the option."""
    with pytest.raises(ConfigError, match=option):
        OpenAIModel("gpt-4o", api_key="k", **{option: 0})


def test_failover_chain_reports_its_smallest_limits() -> None:
    """A failover chain must fit whichever model answers: the smallest window and output."""
    chain = FailoverModel(
        FakeModel(["x"], context_window=9_000), FakeModel(["y"], context_window=7_000)
    )
    assert chain.context_window == 7_000
    assert chain.max_output_tokens is None
