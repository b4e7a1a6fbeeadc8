"""The Redactor: detectors chosen once, then pure text -> text and messages -> messages steps."""

from __future__ import annotations

import bisect
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, get_args

from synopsis._markers import tag_spans
from synopsis.errors import ConfigError
from synopsis.redact._detectors import (
    PII_KINDS,
    SECRET_KINDS,
    Detector,
    PatternDetector,
    builtin_detectors,
)
from synopsis.redact._validators import digits_of

__all__ = ["Finding", "Mode", "RedactionResult", "Redactor", "count_kinds", "redactor_from"]

Mode = Literal["mask", "hash", "drop"]
Path = tuple[str | int, ...]
_KIND_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True, slots=True)
class Finding:
    """One redacted value: its kind and where it was, never the value itself.

    ``start``/``end`` index the string that held it; ``path`` says which string that was
    (``(3, "content")``, ``(5, "tool_calls", 0, "function", "arguments")``; empty for
    :meth:`Redactor.redact_text`). ``replacement`` is what now stands in its place.
    """

    kind: str
    start: int
    end: int
    replacement: str
    path: Path = ()


@dataclass(frozen=True, slots=True)
class RedactionResult:
    """The redacted text and what was taken out of it."""

    text: str
    findings: tuple[Finding, ...]


def _new_key() -> bytes:
    return secrets.token_bytes(32)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Redactor:
    """Removes secrets and personal data from text and chat messages before they leave.

    * ``mode``: ``"mask"`` writes ``[REDACTED:aws_access_key]``; ``"hash"`` writes
      ``[EMAIL#3f2a9c1b]``, the same token for the same value within this redactor (keyed
      HMAC-SHA256, truncated), so a summary can still say "the same key"; ``"drop"`` removes
      the value.
    * ``kinds``: the built-in kinds to look for (default: all, see :data:`SECRET_KINDS` and
      :data:`PII_KINDS`).
    * ``patterns``: your own kinds, ``{"ticket": r"TCK-\\d{6}"}``; a group named ``value`` (or
      else group 1) narrows what is redacted. They take precedence over the built-ins and are
      run as given: keep them free of nested repetition.
    * ``allow``: values never redacted (compared exactly and case-insensitively).
    * ``keep_private_ips``: leave private, loopback and link-local addresses alone.
    * ``hash_key``: the HMAC key; by default a random one per redactor. Pass the same key to
      redactors that must agree (for example across processes of one session).
    """

    mode: Mode = "mask"
    kinds: Collection[str] | None = None
    patterns: Mapping[str, str | re.Pattern[str]] | None = None
    allow: Collection[str] = ()
    keep_private_ips: bool = False
    hash_key: bytes | None = field(default=None, repr=False)
    _detectors: tuple[Detector, ...] = field(init=False, repr=False)
    _allowed: frozenset[str] = field(init=False, repr=False)
    _key: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in get_args(Mode):
            raise ConfigError(f"mode must be one of mask, hash, drop; got {self.mode!r}")
        if isinstance(self.allow, str):
            raise ConfigError("allow must be a collection of values, not one string")
        custom = _custom_detectors(self.patterns or {})
        builtins = _chosen(self.kinds, builtin_detectors(keep_private_ips=self.keep_private_ips))
        object.__setattr__(self, "_detectors", (*custom, *builtins))
        allowed = frozenset(self.allow) | {value.casefold() for value in self.allow}
        object.__setattr__(self, "_allowed", allowed)
        object.__setattr__(self, "_key", self.hash_key or _new_key())

    # -- text ------------------------------------------------------------------------------

    def find(self, text: str) -> tuple[Finding, ...]:
        """What :meth:`redact_text` would take out of ``text``, in order of position."""
        return tuple(
            Finding(kind, start, end, self._replacement(kind, text[start:end]))
            for start, end, kind in self._spans(text)
        )

    def redact_text(self, text: str) -> RedactionResult:
        """``text`` with every finding replaced according to ``mode``."""
        findings = self.find(text)
        if not findings:
            return RedactionResult(text, ())
        pieces: list[str] = []
        cursor = 0
        for finding in findings:
            pieces += (text[cursor : finding.start], finding.replacement)
            cursor = finding.end
        pieces.append(text[cursor:])
        return RedactionResult("".join(pieces), findings)

    def _spans(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping findings; none may touch a synopsis marker tag (structure the
        compaction reads back, such as ``<synopsis:summary version="2">``)."""
        claims = _Claims()
        tags = _Tags(tag_spans(text))
        lowered: str | None = None
        for detector in self._detectors:
            if detector.hints:
                lowered = text.lower() if lowered is None else lowered
                if not any(hint in lowered for hint in detector.hints):
                    continue
            claims.claim_all(
                detector.kind,
                (
                    (start, end)
                    for start, end in detector.find(text)
                    if not self._is_allowed(text[start:end]) and not tags.touch(start, end)
                ),
            )
        return claims.in_order()

    def _is_allowed(self, value: str) -> bool:
        return value in self._allowed or value.casefold() in self._allowed

    def _replacement(self, kind: str, value: str) -> str:
        if self.mode == "mask":
            return f"[REDACTED:{kind}]"
        if self.mode == "drop":
            return ""
        message = f"{kind}\x00{_normalized(kind, value)}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).hexdigest()[:8]
        return f"[{kind.upper()}#{digest}]"

    # -- messages and JSON-like data ---------------------------------------------------------

    def redact_messages(
        self, messages: Iterable[Mapping[str, Any]]
    ) -> tuple[list[dict[str, Any]], tuple[Finding, ...]]:
        """New messages with every string they carry redacted, and the findings (with paths).

        Walks string content and text parts, ``refusal``, ``reasoning_content``, the
        message's ``name`` (a tool's or a participant's), the URL of an image part (not a
        ``data:`` URL: its payload is not text), the file name and URL of a file part, and the
        arguments of tool calls (still valid JSON afterwards when they were JSON); tool
        results are messages too. ``role``, ids, ``usage`` and ``meta`` are left as they are.
        Each message comes back as a new dict, and so does every container on the way to a
        changed string; the input is never modified.
        """
        found: list[Finding] = []
        redacted = [
            self._message(message, (index,), found) for index, message in enumerate(messages)
        ]
        return redacted, tuple(found)

    def redact_data(self, value: Any) -> tuple[Any, tuple[Finding, ...]]:
        """A JSON-like value (dicts, lists, strings, numbers) with every string redacted."""
        found: list[Finding] = []
        return self._data(value, (), found), tuple(found)

    def _text(self, text: str, path: Path, found: list[Finding]) -> str:
        result = self.redact_text(text)
        found.extend(replace(finding, path=path) for finding in result.findings)
        return result.text

    def _message(
        self, message: Mapping[str, Any], path: Path, found: list[Finding]
    ) -> dict[str, Any]:
        result = dict(message)
        for key in ("content", "refusal", "reasoning_content", "name"):
            if isinstance(message.get(key), str):
                result[key] = self._text(message[key], (*path, key), found)
        if isinstance(message.get("content"), list):
            result["content"] = [
                self._part(part, (*path, "content", index), found)
                for index, part in enumerate(message["content"])
            ]
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            result["tool_calls"] = [
                self._call(call, (*path, "tool_calls", index), found)
                for index, call in enumerate(calls)
            ]
        if isinstance(message.get("function_call"), Mapping):
            result["function_call"] = self._function(
                message["function_call"], (*path, "function_call"), found
            )
        return result

    def _part(self, part: Any, path: Path, found: list[Finding]) -> Any:
        if not isinstance(part, Mapping):
            return part
        if isinstance(part.get("text"), str):
            return _with(part, "text", self._text(part["text"], (*path, "text"), found))
        for key, fields in _PART_STRINGS.items():
            inner = part.get(key)
            if isinstance(inner, str) and "url" in fields:  # {"image_url": "https://..."}
                return _with(part, key, self._url(inner, (*path, key), found))
            if isinstance(inner, Mapping):
                changed = inner
                for name in fields:
                    value = changed.get(name)
                    if isinstance(value, str):
                        clean = self._url(value, (*path, key, name), found)
                        changed = _with(changed, name, clean)
                return _with(part, key, changed)
        return part

    def _url(self, value: str, path: Path, found: list[Finding]) -> str:
        """A URL or file name, redacted; a ``data:`` URL (an inline payload) is kept."""
        if value[:5].lower() == "data:":
            return value
        return self._text(value, path, found)

    def _call(self, call: Any, path: Path, found: list[Finding]) -> Any:
        if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
            return call
        function = self._function(call["function"], (*path, "function"), found)
        return _with(call, "function", function)

    def _function(self, function: Mapping[str, Any], path: Path, found: list[Finding]) -> Any:
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            return function
        return _with(function, "arguments", self._arguments(arguments, (*path, "arguments"), found))

    def _arguments(self, arguments: str, path: Path, found: list[Finding]) -> str:
        """Redacted in place; decoded, walked and encoded again only if that broke the JSON.

        Built-in replacements never contain a quote or a backslash, so only a custom pattern
        that matches across JSON syntax takes the second road.
        """
        result = self.redact_text(arguments)
        if result.findings and _is_json(arguments) and not _is_json(result.text):
            data = self._data(json.loads(arguments), path, found)
            return json.dumps(data, ensure_ascii=False)
        found.extend(replace(finding, path=path) for finding in result.findings)
        return result.text

    def _data(self, value: Any, path: Path, found: list[Finding]) -> Any:
        if isinstance(value, str):
            return self._text(value, path, found)
        if isinstance(value, Mapping):
            return {key: self._data(item, (*path, key), found) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._data(item, (*path, index), found) for index, item in enumerate(value)]
        return value


# ---------------------------------------------------------------------------------------------
# Helpers


class _Claims:
    """Non-overlapping spans, first come first served (detectors arrive in priority order).

    Each detector's findings are sorted once and merged with the spans claimed so far in one
    walk over both lists, so a text costs O(findings) per detector, however the findings of
    two detectors interleave (inserting each into the middle of a list was quadratic).
    ``steps`` counts the spans each merge walked over: the tests read it to keep it linear.
    """

    def __init__(self) -> None:
        self._spans: list[tuple[int, int, str]] = []
        self.steps = 0

    def claim_all(self, kind: str, spans: Iterable[tuple[int, int]]) -> None:
        """Claim each of ``spans`` that overlaps no span claimed before it, in the order found.

        The spans are cut into runs that are sorted and disjoint (a detector reports in order
        of position, or in a few such runs, as IPv6 then IPv4), and each run is merged in turn.
        """
        run: list[tuple[int, int]] = []
        for start, end in spans:
            if end <= start:
                continue
            if run and run[-1][1] > start:
                self._merge(kind, run)
                run = []
            run.append((start, end))
        if run:
            self._merge(kind, run)

    def _merge(self, kind: str, run: list[tuple[int, int]]) -> None:
        old = self._spans
        merged: list[tuple[int, int, str]] = []
        index = 0
        for start, end in run:
            while index < len(old) and old[index][1] <= start:
                merged.append(old[index])
                index += 1
            if index < len(old) and old[index][0] < end:
                continue  # overlaps a span claimed before
            merged.append((start, end, kind))
        merged.extend(old[index:])
        self.steps += len(run) + len(old)
        self._spans = merged

    def in_order(self) -> list[tuple[int, int, str]]:
        return self._spans


class _Tags:
    """Marker tags, sorted and disjoint: does a span overlap one? O(log tags)."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self._starts = [start for start, _ in spans]
        self._ends = [end for _, end in spans]

    def touch(self, start: int, end: int) -> bool:
        index = bisect.bisect_left(self._starts, end) - 1  # the last tag starting before end
        return index >= 0 and self._ends[index] > start


def count_kinds(findings: Iterable[Finding]) -> dict[str, int]:
    """How many values of each kind ``findings`` took out, by kind name (sorted): what a
    report may say about a redaction, since it never names a value."""
    counts: dict[str, int] = {}
    for finding in findings:
        counts[finding.kind] = counts.get(finding.kind, 0) + 1
    return dict(sorted(counts.items()))


def _with(mapping: Mapping[str, Any], key: str, value: Any) -> Any:
    """``mapping`` itself when ``value`` is unchanged, else a copy with ``key`` set."""
    if mapping.get(key) is value:
        return mapping
    result = dict(mapping)
    result[key] = value
    return result


#: The strings of non-text content parts that are redacted: URLs and file names, never inline
#: payloads (``file_data``, ``input_audio``), which are base64, not text.
_PART_STRINGS: Final[dict[str, tuple[str, ...]]] = {
    "image_url": ("url",),
    "file": ("filename", "file_url", "url"),
    "input_file": ("filename", "file_url", "url"),
}


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


_NORMALIZERS: Final[dict[str, Callable[[str], str]]] = {
    "email": str.casefold,
    "phone": digits_of,
    "payment_card": digits_of,
    "cn_resident_id": str.upper,
    "iban": lambda value: value.replace(" ", "").upper(),
}


def _normalized(kind: str, value: str) -> str:
    """One spelling per value, so ``4111 1111 ...`` and ``4111-1111-...`` hash alike."""
    normalize = _NORMALIZERS.get(kind)
    return normalize(value) if normalize else value


def _chosen(kinds: Collection[str] | None, detectors: Sequence[Detector]) -> Iterator[Detector]:
    if kinds is None:
        return iter(detectors)
    if isinstance(kinds, str):
        raise ConfigError("kinds must be a collection of kind names, not one string")
    unknown = set(kinds) - SECRET_KINDS - PII_KINDS
    if unknown:
        known = ", ".join(sorted(SECRET_KINDS | PII_KINDS))
        raise ConfigError(f"unknown redaction kinds {sorted(unknown)}; choose from {known}")
    return (detector for detector in detectors if detector.kind in kinds)


def _custom_detectors(
    patterns: Mapping[str, str | re.Pattern[str]],
) -> Iterator[PatternDetector]:
    for kind, pattern in patterns.items():
        if not isinstance(kind, str) or not _KIND_NAME.fullmatch(kind):
            raise ConfigError(
                f"pattern name {kind!r} must be lower case letters, digits and _ (a kind)"
            )
        try:
            compiled = re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ConfigError(f"pattern {kind!r} does not compile: {exc}") from exc
        group: int | str = (
            "value" if "value" in compiled.groupindex else (1 if compiled.groups else 0)
        )
        yield PatternDetector(kind, compiled, groups=(group,))


def redactor_from(redact: Redactor | bool | None) -> Redactor | None:
    """The ``redact=`` option: a Redactor, True (every kind, masked) or None / False (off)."""
    if isinstance(redact, bool):
        return Redactor() if redact else None
    if redact is None or isinstance(redact, Redactor):
        return redact
    raise ConfigError(f"redact must be a Redactor, True or None (off), got {redact!r}")
