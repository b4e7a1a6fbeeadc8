"""Conversion between our OpenAI-shape messages and Pydantic AI messages (``pydantic-ai-slim``).

Mapping:

- a ``ModelRequest`` becomes one message per part: ``SystemPromptPart`` <-> ``system``
  (``developer`` goes to a system prompt too), ``UserPromptPart`` <-> ``user`` (text, image
  URLs and binary images/audio <-> ``text``, ``image_url`` and ``input_audio`` parts; other
  user content passes as a part typed by its ``kind``), ``ToolReturnPart`` <-> ``tool`` (its
  text as the model sees it; an error outcome <-> ``meta["is_error"]``); the deprecated
  ``RetryPromptPart`` and ``RetryFeedbackPart`` become the tool or user message the model
  reads. Consecutive non-assistant messages share one ``ModelRequest`` on the way back;
- a ``ModelResponse`` <-> one assistant message: ``TextPart`` -> ``content`` (one text is a
  string, several a list of text parts), ``ThinkingPart`` -> ``reasoning_content``,
  ``ToolCallPart`` -> ``tool_calls`` (ids kept, so calls and returns stay paired), ``usage``
  <-> ``RequestUsage`` (cache reads, reasoning and audio tokens as OpenAI's details).

A tool return's ``tool_name`` is the name of the call it answers; our tool message keeps a
``name`` only where it differs. With ``keep_extras=True`` :func:`from_pydantic_ai` carries
everything else (timestamps, model names, run ids, instructions, provider details, parts we
cannot map, the exact tool return value) under ``CARRY_KEY``, so :func:`to_pydantic_ai`
restores equal messages (equal as Pydantic AI serializes them). :func:`to_pydantic_ai` keeps
what Pydantic AI has no field for (``meta``, ``name``, a ``developer`` role, list content of
system messages) in the messages' ``metadata``, which is never sent to a model. Parts built
without carried data get Pydantic AI's default timestamps (now).

``pydantic-ai-slim`` is an optional dependency, imported when a function is called.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from synopsis.convert._carry import (
    CARRY_KEY,
    Fields,
    carried,
    diff,
    group_fields,
    parse_object,
    restore,
    ungroup_fields,
    with_carried,
    without,
)
from synopsis.convert._parts import is_text_part
from synopsis.errors import InvalidMessage

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from pydantic_ai.messages import ModelRequest, ModelResponse

__all__ = ["from_pydantic_ai", "to_pydantic_ai"]

_FRAMEWORK: Final = "pydantic_ai"
_PART: Final = "part:"
_REQUEST: Final = "request:"
_REST: Final = "rest:"
_NAMES = dict[Any, Any]  # tool call id -> tool name


def from_pydantic_ai(
    messages: Sequence[ModelRequest | ModelResponse], *, keep_extras: bool = False
) -> list[dict[str, Any]]:
    """Our messages for Pydantic AI messages (e.g. ``result.all_messages()``)."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart

    names = {
        part.tool_call_id: part.tool_name
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    }
    result: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            result.append(_from_response(message, keep_extras))
        elif isinstance(message, ModelRequest):
            result.extend(_from_request(message, names, keep_extras))
        else:
            raise InvalidMessage(
                f"expected a ModelRequest or ModelResponse, got {type(message).__name__}",
                index=index,
            )
    return result


def to_pydantic_ai(
    messages: Sequence[Mapping[str, Any]], *, keep_extras: bool = True
) -> list[ModelRequest | ModelResponse]:
    """Pydantic AI messages for our messages (a valid ``message_history``)."""
    names = {
        call.get("id"): (call.get("function") or {}).get("name")
        for message in messages
        for call in message.get("tool_calls") or []
    }
    dumps: list[Fields] = []
    units: list[Fields] = []  # the parts of the request being gathered
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in {"system", "developer", "user", "assistant", "tool"}:
            raise InvalidMessage(f"cannot convert role {role!r} to Pydantic AI", index=index)
        if role == "assistant":
            if units:
                dumps.append(_assemble_request(units))
                units = []
            dumps.append(_response_dump(message, keep_extras))
            continue
        unit = _request_unit(message, names, keep_extras, starts=not units)
        if units and any(k.startswith(_REQUEST) for k in unit["fields"]):
            dumps.append(_assemble_request(units))  # carried data says a new request starts here
            units = []
        units.append(unit)
    if units:
        dumps.append(_assemble_request(units))
    return [_message_adapter().validate_python(dump) for dump in dumps]


# ---------------------------------------------------------------------------------------------
# Responses


def _from_response(message: ModelResponse, keep_extras: bool) -> dict[str, Any]:
    fields = _response_fields(_dump(message))
    base = _std_from_response(message)
    ours = (message.metadata or {}).get(CARRY_KEY)
    result = restore(base, ours, lambda m: _std_from_response(_std_response(m)))
    if keep_extras:
        rebuilt = _response_fields(_dump(_std_response(result)))
        with_carried(result, _FRAMEWORK, diff(fields, rebuilt, sealed=True))
    return result


def _response_dump(message: Mapping[str, Any], keep_extras: bool) -> Fields:
    own = without(message, CARRY_KEY)
    std = _std_response(own)
    base = _response_fields(_dump(std))
    fields = restore(
        base,
        carried(message, _FRAMEWORK),
        lambda f: _read(f, lambda d: _std_from_response(_build_response(d))),
    )
    dump = _unflatten_response(fields)
    extras = diff(own, _std_from_response(std)) if keep_extras else {}
    return _with_ours(dump, extras)


def _response_fields(dump: Mapping[str, Any]) -> Fields:
    fields = {k: v for k, v in dump.items() if k != "parts"}
    fields["metadata"] = _metadata_without_ours(dump.get("metadata"))
    fields.update(group_fields(dump.get("parts") or [], lambda p: str(p.get("part_kind"))))
    return fields


def _unflatten_response(fields: Mapping[str, Any]) -> Fields:
    dump = {k: v for k, v in fields.items() if ":" not in k and k != "order"}
    dump["parts"] = ungroup_fields(fields)
    return dump


def _build_response(fields: Mapping[str, Any]) -> ModelResponse:
    from pydantic_ai.messages import ModelResponse

    message = _message_adapter().validate_python(_unflatten_response(fields))
    assert isinstance(message, ModelResponse)
    return message


def _std_response(message: Mapping[str, Any]) -> ModelResponse:
    from pydantic_ai.messages import ModelResponse, TextPart, ThinkingPart, ToolCallPart

    parts: list[Any] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        parts.append(ThinkingPart(reasoning))
    content = message.get("content")
    if isinstance(content, str):
        parts.append(TextPart(content))
    elif isinstance(content, list):
        parts.extend(TextPart(p["text"]) for p in content if is_text_part(p))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(
            ToolCallPart(
                str(function.get("name")), _args(function.get("arguments")), str(call.get("id"))
            )
        )
    return ModelResponse(parts=parts, usage=_usage_to(message.get("usage")))


def _std_from_response(message: ModelResponse) -> dict[str, Any]:
    from pydantic_ai.messages import TextPart, ThinkingPart, ToolCallPart

    texts = [p.content for p in message.parts if isinstance(p, TextPart)]
    thoughts = [p.content for p in message.parts if isinstance(p, ThinkingPart)]
    calls = [_call(p) for p in message.parts if isinstance(p, ToolCallPart)]
    result: dict[str, Any] = {"role": "assistant", "content": _text_content(texts)}
    if thoughts:
        result["reasoning_content"] = "\n\n".join(thoughts)
    if calls:
        result["tool_calls"] = calls
    usage = _usage_from(message.usage)
    if usage is not None:
        result["usage"] = usage
    return result


def _text_content(texts: list[str]) -> Any:
    if not texts:
        return None
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": t} for t in texts]


def _call(part: Any) -> dict[str, Any]:
    args = part.args
    arguments = (
        args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False, default=str)
    )
    return {
        "id": part.tool_call_id,
        "type": "function",
        "function": {"name": part.tool_name, "arguments": arguments},
    }


def _args(raw: Any) -> Any:
    """Arguments as a dict when that serializes back to the same text, else the text itself."""
    parsed = parse_object(raw)
    if parsed is not None and json.dumps(parsed, ensure_ascii=False) == raw:
        return parsed
    return raw


# ---------------------------------------------------------------------------------------------
# Requests: one message per part; the first message of a request also carries the request's
# own fields and the parts that have no message.


def _from_request(message: ModelRequest, names: _NAMES, keep_extras: bool) -> list[dict[str, Any]]:
    dump = _dump(message)
    ours = (message.metadata or {}).get(CARRY_KEY)
    ours = ours if isinstance(ours, Mapping) else {}
    bases = {i: _std_from_part(part, names) for i, part in enumerate(message.parts)}
    mapped = [i for i, base in bases.items() if base is not None]

    def meaning(item: Mapping[str, Any]) -> object:
        return _std_from_part(_std_part(item, names), names)

    result = []
    for index in mapped:
        item = restore(bases[index] or {}, ours.get(str(index)), meaning)
        if keep_extras:
            fields = {_PART + k: v for k, v in dump["parts"][index].items()}
            rebuilt = {_PART + k: v for k, v in _dump_part(_std_part(item, names)).items()}
            if index == mapped[0]:
                fields.update(_request_extras(dump, set(mapped)))
                rebuilt.update(_request_extras(_dump(_empty_request()), set()))
            with_carried(item, _FRAMEWORK, diff(fields, rebuilt))
        result.append(item)
    return result


def _request_extras(dump: Mapping[str, Any], mapped: set[int]) -> Fields:
    """The request's own fields, and its parts that have no message of their own."""
    fields = {_REQUEST + k: v for k, v in dump.items() if k not in {"parts", "metadata"}}
    fields[_REQUEST + "metadata"] = _metadata_without_ours(dump.get("metadata"))
    parts = dump.get("parts") or []
    fields.update((f"{_REST}{i}", part) for i, part in enumerate(parts) if i not in mapped)
    return fields


def _request_unit(
    message: Mapping[str, Any], names: _NAMES, keep_extras: bool, starts: bool
) -> Fields:
    """The fields of one request part (plus request fields if it starts one) and our extras."""
    own = without(message, CARRY_KEY)
    std = _std_part(own, names)
    base = {_PART + k: v for k, v in _dump_part(std).items()}
    if starts:
        base.update(_request_extras(_dump(_empty_request()), set()))
    fields = restore(
        base,
        carried(message, _FRAMEWORK),
        lambda f: _read(f, lambda d: _std_from_part(_build_part(d), names)),
    )
    extras = diff(own, _std_from_part(std, names) or {}) if keep_extras else {}
    return {"fields": fields, "extras": extras}


def _assemble_request(units: list[Fields]) -> Fields:
    """One request dump from its part units: parts without a message go back to their places."""
    first = units[0]["fields"]
    dump = {k[len(_REQUEST) :]: v for k, v in first.items() if k.startswith(_REQUEST)}
    rest = {int(k[len(_REST) :]): v for k, v in first.items() if k.startswith(_REST)}
    slots: dict[int, Any] = dict(rest)
    ours: Fields = {}
    position = 0
    for unit in units:
        while position in slots:
            position += 1
        slots[position] = {
            k[len(_PART) :]: v for k, v in unit["fields"].items() if k.startswith(_PART)
        }
        if unit["extras"]:
            ours[str(position)] = unit["extras"]
        position += 1
    dump["kind"] = "request"
    dump["parts"] = [slots[i] for i in sorted(slots)]
    return _with_ours(dump, ours)


def _std_part(message: Mapping[str, Any], names: _NAMES) -> Any:
    from pydantic_ai.messages import SystemPromptPart, ToolReturnPart, UserPromptPart

    role = message.get("role")
    content = message.get("content")
    if role in {"system", "developer"}:
        return SystemPromptPart(_plain_text(content))
    if role == "tool":
        call_id = message.get("tool_call_id")
        meta = message.get("meta")
        failed = isinstance(meta, Mapping) and bool(meta.get("is_error"))
        return ToolReturnPart(
            str(message.get("name") or names.get(call_id) or ""),
            _user_content(content) if content is not None else "",
            str(call_id),
            outcome="failed" if failed else "success",
        )
    return UserPromptPart(_user_content(content) if content is not None else "")


def _std_from_part(part: Any, names: _NAMES) -> dict[str, Any] | None:
    from pydantic_ai import messages as pm

    if isinstance(part, pm.SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, pm.UserPromptPart):
        return {"role": "user", "content": _content_from(part.content)}
    if isinstance(part, pm.ToolReturnPart):
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": part.tool_call_id,
            "content": _tool_content(part),
        }
        return _tool_extras(message, part.tool_name, names, part.outcome in pm.ERROR_OUTCOMES)
    if isinstance(part, pm.RetryPromptPart):  # deprecated; still found in older histories
        text = part.model_response()
        if part.tool_name is None:
            return {"role": "user", "content": text}
        message = {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
        return _tool_extras(message, part.tool_name, names, True)
    if isinstance(part, pm.RetryFeedbackPart):
        return {"role": "user", "content": part.model_response()}
    return None


def _tool_extras(
    message: dict[str, Any], tool_name: str, names: _NAMES, failed: bool
) -> dict[str, Any]:
    if tool_name != names.get(message["tool_call_id"]):
        message["name"] = tool_name
    if failed:
        message["meta"] = {"is_error": True}
    return message


def _tool_content(part: Any) -> Any:
    content = part.content
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(_is_user_content(c) for c in content):
        return _content_from(content)
    return part.model_response_str(wrap_if_error=False)


# ---------------------------------------------------------------------------------------------
# User content <-> parts


def _is_user_content(item: Any) -> bool:
    from pydantic_ai import messages as pm

    return isinstance(item, str | pm.TextContent | pm.BinaryContent | pm.FileUrl | pm.UploadedFile)


def _content_from(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [_part_from(item) for item in content]


def _part_from(item: Any) -> dict[str, Any]:
    from pydantic_ai import messages as pm

    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, pm.TextContent) and type(item) is pm.TextContent:
        return {"type": "text", "text": item.content}
    if isinstance(item, pm.ImageUrl):
        return {"type": "image_url", "image_url": {"url": item.url}}
    if isinstance(item, pm.BinaryContent) and item.is_image:
        return {"type": "image_url", "image_url": {"url": item.data_uri}}
    if isinstance(item, pm.BinaryContent) and item.is_audio and item.format in {"wav", "mp3"}:
        return {"type": "input_audio", "input_audio": {"data": item.base64, "format": item.format}}
    dump = _content_adapter().dump_python(item, mode="json")
    return {"type": dump.pop("kind", type(item).__name__), **dump}


def _user_content(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    items = [_item_to(part) for part in content]
    return [item for item in items if item is not None]


def _item_to(part: Any) -> Any:
    from pydantic_ai import messages as pm

    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if is_text_part(part):
        return part["text"]
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else None
    if kind == "image_url" and isinstance(url, str):
        return pm.BinaryContent.from_data_uri(url) if url.startswith("data:") else pm.ImageUrl(url)
    audio = part.get("input_audio")
    if kind == "input_audio" and isinstance(audio, Mapping):
        uri = f"data:audio/{audio.get('format')};base64,{audio.get('data')}"
        return pm.BinaryContent.from_data_uri(uri)
    try:
        return _content_adapter().validate_python({**without(part, "type"), "kind": kind})
    except ValueError:
        return None  # not something Pydantic AI can hold; carried as our extras


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if is_text_part(p))
    return ""


# ---------------------------------------------------------------------------------------------
# Usage


# (our details key, ((our key, RequestUsage field), ...))
_DETAILS: Final = (
    (
        "prompt_tokens_details",
        (("cached_tokens", "cache_read_tokens"), ("audio_tokens", "input_audio_tokens")),
    ),
    (
        "completion_tokens_details",
        (("reasoning_tokens", "output_reasoning_tokens"), ("audio_tokens", "output_audio_tokens")),
    ),
)


def _usage_to(usage: Any) -> Any:
    from pydantic_ai.usage import RequestUsage

    if not isinstance(usage, Mapping):
        return RequestUsage()
    counts: dict[str, Any] = {
        "input_tokens": _count(usage.get("prompt_tokens")),
        "output_tokens": _count(usage.get("completion_tokens")),
    }
    for ours, keys in _DETAILS:
        details = usage.get(ours)
        if isinstance(details, Mapping):
            counts.update((field, _count(details.get(key))) for key, field in keys)
    return RequestUsage(**counts)


def _usage_from(usage: Any) -> dict[str, Any] | None:
    from pydantic_ai.usage import RequestUsage

    if usage == RequestUsage():
        return None
    result: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    for ours, keys in _DETAILS:
        details = {key: getattr(usage, field) for key, field in keys if getattr(usage, field)}
        if details:
            result[ours] = details
    return result


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# ---------------------------------------------------------------------------------------------
# Dumps: Pydantic AI's own JSON form (as ModelMessagesTypeAdapter writes it)


@cache
def _adapter(kind: str) -> TypeAdapter[Any]:
    from pydantic import ConfigDict, TypeAdapter
    from pydantic_ai import messages as pm

    config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")
    target: Any = {
        "message": pm.ModelMessage,
        "request_part": pm.ModelRequestPart,
        "content": pm.UserContent,
    }[kind]
    return TypeAdapter(target, config=config)


def _message_adapter() -> TypeAdapter[Any]:
    return _adapter("message")


def _content_adapter() -> TypeAdapter[Any]:
    return _adapter("content")


def _dump(message: Any) -> Fields:
    dump: Fields = _message_adapter().dump_python(message, mode="json")
    return dump


def _dump_part(part: Any) -> Fields:
    dump: Fields = _adapter("request_part").dump_python(part, mode="json")
    return dump


def _build_part(fields: Mapping[str, Any]) -> Any:
    dump = {k[len(_PART) :]: v for k, v in fields.items() if k.startswith(_PART)}
    return _adapter("request_part").validate_python(dump)


def _read(fields: Fields, meaning: Callable[[Fields], object]) -> object:
    """What ``fields`` say; carried data that no longer validates says something else."""
    try:
        return meaning(fields)
    except ValueError:
        return _INVALID


_INVALID: Final = object()


def _empty_request() -> ModelRequest:
    from pydantic_ai.messages import ModelRequest

    return ModelRequest(parts=[])


def _metadata_without_ours(metadata: Any) -> Any:
    if not isinstance(metadata, Mapping) or CARRY_KEY not in metadata:
        return metadata
    return without(metadata, CARRY_KEY) or None


def _with_ours(dump: Fields, extras: Fields) -> Fields:
    if extras:
        dump["metadata"] = {**(dump.get("metadata") or {}), CARRY_KEY: extras}
    return dump
