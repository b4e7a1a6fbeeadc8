"""The language a compaction writes its summary in, when none was set: the history's own.

A cheap, deterministic check, no model: over the newest user and assistant text (at most
:data:`SAMPLE_CHARS` characters, newest messages first; summaries and other internal
messages are not read), the history is Chinese when Han characters make up at least
:data:`HAN_SHARE` of the non-space characters and Japanese kana are fewer than
:data:`KANA_LIMIT` of the Han characters (Japanese text is full of Han characters too);
otherwise it is English. An explicit ``prompts=`` (``--language`` on the command line)
always wins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from synopsis.messages import content_type, text_of
from synopsis.prompts import CHINESE, ENGLISH, PromptSet

__all__ = ["HAN_SHARE", "KANA_LIMIT", "SAMPLE_CHARS", "detect_prompts"]

#: The least share of Han characters among the non-space characters that makes a history
#: Chinese. One Han character stands for a word of several Latin letters, so a Chinese chat
#: that quotes paths, code and English terms stays above a tenth; English text has none.
HAN_SHARE: Final = 0.1
#: Kana at or above this share of the Han characters mean Japanese, not Chinese.
KANA_LIMIT: Final = 0.1
#: How much of the newest user and assistant text is read.
SAMPLE_CHARS: Final = 8_000

_HAN: Final = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA: Final = re.compile(r"[\u3040-\u30ff]")
_SPACE: Final = re.compile(r"\s+")


def detect_prompts(messages: Sequence[Mapping[str, Any]]) -> PromptSet:
    """The built-in prompt set for the language of ``messages`` (see the module docstring)."""
    sample = _SPACE.sub("", _sample(messages))
    if not sample:
        return ENGLISH
    han = len(_HAN.findall(sample))
    if han < HAN_SHARE * len(sample) or len(_KANA.findall(sample)) >= KANA_LIMIT * han:
        return ENGLISH
    return CHINESE


def _sample(messages: Sequence[Mapping[str, Any]]) -> str:
    """The newest user and assistant text, newest first, at most SAMPLE_CHARS long."""
    parts: list[str] = []
    size = 0
    for message in reversed(messages):
        if message.get("role") not in ("user", "assistant") or content_type(message):
            continue
        text = text_of(message)
        parts.append(text[: SAMPLE_CHARS - size])
        size += len(parts[-1])
        if size >= SAMPLE_CHARS:
            break
    return "".join(parts)
