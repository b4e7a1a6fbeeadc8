"""Context windows and output limits of the common model families, and the summarizer's share.

A pure table: model-id patterns -> :class:`ModelLimits`, searched in the model id after the
provider prefix (``gpt-4o-mini``, ``anthropic/claude-3-5-sonnet-20240620``,
``meta-llama/Llama-3.1-8B-Instruct``, ``qwen2.5:7b``), case-insensitively, most specific
pattern first. A model none of them matches gets :data:`UNKNOWN`, a deliberately small window,
so that an unknown local model is summarized in chunks rather than sent a request it refuses.
A model's own ``context_window=`` / ``max_output_tokens=`` and the summarizer's ``window=`` /
``max_output_tokens=`` override the table.

The window is what one request may hold in total, prompt and answer together (that is how
OpenAI, Anthropic and OpenAI-compatible servers such as vLLM count it); where a provider
publishes only an input limit (Gemini) that limit is used, which is the smaller reading.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "KNOWN_LIMITS",
    "OUTPUT_FLOOR",
    "OUTPUT_SHARE",
    "UNKNOWN",
    "ModelLimits",
    "limits_for",
    "output_budget",
    "smallest",
]


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """What a model accepts: ``window`` tokens per request, at most ``max_output`` of them
    generated."""

    window: int
    max_output: int


#: For a model the table does not know: chunked rather than overflowed.
UNKNOWN: Final = ModelLimits(8_192, 2_048)

_K: Final = 1_000
_KI: Final = 1_024

# Patterns are searched (re.search, case-insensitive) in the model id; the first match wins, so
# a more specific pattern stands before the family it belongs to.
_TABLE: Final[tuple[tuple[str, ModelLimits], ...]] = (
    # OpenAI: https://platform.openai.com/docs/models (one page per model, "Context window"
    # and "Max output tokens").
    (r"gpt-5[\w.-]*chat", ModelLimits(128 * _K, 16_384)),
    (r"gpt-5", ModelLimits(400 * _K, 128 * _K)),
    (r"gpt-oss", ModelLimits(131_072, 131_072)),
    (r"gpt-4\.1", ModelLimits(1_047_576, 32_768)),
    (r"gpt-4\.5", ModelLimits(128 * _K, 16_384)),
    (r"gpt-4o-2024-05-13", ModelLimits(128 * _K, 4_096)),
    (r"gpt-4o", ModelLimits(128 * _K, 16_384)),
    (r"gpt-4-(turbo|\d{4}-preview|vision)", ModelLimits(128 * _K, 4_096)),
    (r"gpt-4-32k", ModelLimits(32_768, 8_192)),
    (r"gpt-4", ModelLimits(8_192, 8_192)),
    (r"gpt-3\.5-turbo", ModelLimits(16_385, 4_096)),
    (r"\bo1-mini", ModelLimits(128 * _K, 65_536)),
    (r"\bo1-preview", ModelLimits(128 * _K, 32_768)),
    (r"\bo[134](?![\w.])", ModelLimits(200 * _K, 100 * _K)),
    # Anthropic: https://docs.anthropic.com/en/docs/about-claude/models/overview ("Context
    # window", "Max output"); every Claude 3 and 4 model has a 200K window.
    (r"claude-opus-4[-.]5", ModelLimits(200 * _K, 64 * _K)),
    (r"claude-opus-4", ModelLimits(200 * _K, 32 * _K)),
    (r"claude-(sonnet|haiku)-4", ModelLimits(200 * _K, 64 * _K)),
    (r"claude-3[-.]7", ModelLimits(200 * _K, 64 * _K)),
    (r"claude-3[-.]5", ModelLimits(200 * _K, 8_192)),
    (r"claude-3", ModelLimits(200 * _K, 4_096)),
    (r"claude", ModelLimits(100 * _K, 4_096)),  # claude-2.0 and claude-instant: 100K
    # Gemini: https://ai.google.dev/gemini-api/docs/models ("Input token limit", "Output
    # token limit").
    (r"gemini-2\.5", ModelLimits(1_048_576, 65_536)),
    (r"gemini-1\.5-pro", ModelLimits(2_097_152, 8_192)),
    (r"gemini", ModelLimits(1_048_576, 8_192)),  # gemini-2.0-flash(-lite), gemini-1.5-flash
    # Qwen: https://www.alibabacloud.com/help/en/model-studio/models (API models) and the
    # Qwen2.5 / Qwen3 model cards on https://huggingface.co/Qwen (32,768 tokens native
    # context, longer only with YaRN scaling that servers do not enable by default;
    # generation up to 8,192 tokens).
    (r"qwen-?max", ModelLimits(32_768, 8_192)),
    (r"qwen-?plus", ModelLimits(131_072, 8_192)),
    (r"qwen-?turbo", ModelLimits(1_000_000, 8_192)),
    (r"qwen", ModelLimits(32_768, 8_192)),
    (r"qwq", ModelLimits(32_768, 8_192)),
    # Llama: https://www.llama.com/docs/model-cards-and-prompt-formats/ (Llama 3.1, 3.2 and
    # 3.3: 128K context; Llama 3: 8K; Llama 2: 4K). No separate output limit is published;
    # the output share below bounds it.
    (r"llama-?3\.[123]", ModelLimits(131_072, 8_192)),
    (r"llama-?4", ModelLimits(131_072, 8_192)),
    (r"llama-?2", ModelLimits(4_096, 4_096)),
    (r"llama", ModelLimits(8_192, 4_096)),
    # DeepSeek: https://api-docs.deepseek.com/quick_start/pricing (deepseek-chat and
    # deepseek-reasoner: 64K context, 8K max output); the coder models' cards on
    # https://huggingface.co/deepseek-ai (DeepSeek-Coder: 16K; DeepSeek-Coder-V2: 128K).
    (r"deepseek-coder-v2", ModelLimits(128 * _K, 8_192)),
    (r"deepseek-coder", ModelLimits(16_384, 4_096)),
    (r"deepseek", ModelLimits(64 * _K, 8_192)),
    # Mistral: https://docs.mistral.ai/getting-started/models/models_overview/ ("Max
    # tokens" is the context length; no separate output limit is published).
    (r"codestral.*22b", ModelLimits(32_768, 8_192)),
    (r"codestral", ModelLimits(256 * _K, 8_192)),
    (r"magistral", ModelLimits(40 * _K, 8_192)),  # 128K, "performance might degrade past 40k"
    (r"mistral-small-3|mistral-small-(24|25)", ModelLimits(128 * _KI, 8_192)),
    (r"mistral-small", ModelLimits(32_768, 8_192)),
    (r"mistral-(large|medium|nemo)|ministral|pixtral|devstral", ModelLimits(128 * _KI, 8_192)),
    (r"mixtral-8x22b", ModelLimits(64 * _KI, 8_192)),
    (r"mistral|mixtral", ModelLimits(32_768, 8_192)),
)

#: The table, compiled: (pattern, limits), most specific first.
KNOWN_LIMITS: Final[tuple[tuple[re.Pattern[str], ModelLimits], ...]] = tuple(
    (re.compile(pattern, re.IGNORECASE), limits) for pattern, limits in _TABLE
)

#: The summarizer's answer gets at most this share of the window ...
OUTPUT_SHARE: Final = 4
#: ... but at least this many tokens (unless the model itself allows fewer).
OUTPUT_FLOOR: Final = 1_024


def limits_for(model_id: str) -> ModelLimits:
    """The limits of ``model_id`` (without the ``provider:`` prefix), or :data:`UNKNOWN`."""
    for pattern, limits in KNOWN_LIMITS:
        if pattern.search(model_id):
            return limits
    return UNKNOWN


def output_budget(window: int, max_output: int | None = None) -> int:
    """The tokens a summary may use in ``window``: a quarter of it, at least
    :data:`OUTPUT_FLOOR`, never more than the model's ``max_output``."""
    share = max(OUTPUT_FLOOR, window // OUTPUT_SHARE)
    return share if max_output is None else min(max_output, share)


def smallest(values: Iterable[object]) -> int | None:
    """The smallest positive integer among ``values`` (None when there is none): a request
    must fit whichever model of a chain answers it."""
    known = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return min(known) if known else None
