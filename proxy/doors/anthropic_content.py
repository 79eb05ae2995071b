"""A Messages request's `system` and `messages` as core (Chat Completions) messages.

See `anthropic_codec` for where each block lands. The assistant message comes out in the
core's normal form (`content` a string for one plain text block, null without text;
`tool_calls` with compact JSON arguments; `thinking_blocks`), so a message a client sends
back equals the one journaled from the answer.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.doors.anthropic_fields import (
    Breakpoints,
    as_bool,
    as_list,
    as_object,
    as_string,
    marked,
    only_keys,
    refuse_set,
    required,
)
from proxy.errors import BadRequest
from proxy.types import JSONObject, Message

_SERVER_BLOCKS = "server tool blocks are not supported by this proxy (only custom tools)"


def system_messages(value: object, counter: Breakpoints) -> list[Message]:
    if isinstance(value, str):
        return [{"role": "system", "content": value}] if value else []
    parts = [_text_part(raw, f"system[{i}]", counter) for i, raw in enumerate(as_list(value, "system"))]
    return [{"role": "system", "content": _content(parts)}] if parts else []


def _content(parts: list[JSONObject]) -> Any:
    """The normal form: one plain text part is a string, no part is null, else the list."""
    if not parts:
        return None
    if len(parts) == 1 and parts[0]["type"] == "text" and "cache_control" not in parts[0]:
        return parts[0]["text"]
    return parts


def _block(raw: object, param: str) -> tuple[JSONObject, str]:
    block = as_object(raw, param)
    return block, as_string(required(block, "type", param), f"{param}.type")


def _text_part(raw: object, param: str, counter: Breakpoints) -> JSONObject:
    block, kind = _block(raw, param)
    if kind != "text":
        raise BadRequest(f"{param}.type: Input should be 'text'", param=f"{param}.type")
    only_keys(block, frozenset({"type", "text", "cache_control", "citations"}), param)
    refuse_set(block, "citations", param, "citations are not supported by this proxy")
    text = as_string(required(block, "text", param), f"{param}.text")
    return marked({"type": "text", "text": text}, counter.take(block, param))


def _image_part(block: JSONObject, param: str, counter: Breakpoints) -> JSONObject:
    only_keys(block, frozenset({"type", "source", "cache_control", "transformations"}), param)
    refuse_set(block, "transformations", param, "image transformations are not supported by this proxy")
    source = as_object(required(block, "source", param), f"{param}.source")
    kind = as_string(required(source, "type", f"{param}.source"), f"{param}.source.type")
    if kind == "base64":
        only_keys(source, frozenset({"type", "media_type", "data"}), f"{param}.source")
        media = as_string(required(source, "media_type", f"{param}.source"), f"{param}.source.media_type")
        data = as_string(required(source, "data", f"{param}.source"), f"{param}.source.data")
        url = f"data:{media};base64,{data}"
    elif kind == "url":
        only_keys(source, frozenset({"type", "url"}), f"{param}.source")
        url = as_string(required(source, "url", f"{param}.source"), f"{param}.source.url")
    else:
        why = f"image source type {kind!r} is not supported by this proxy (base64 or url)"
        raise BadRequest(f"{param}.source.type: {why}", param=f"{param}.source.type")
    return marked({"type": "image_url", "image_url": {"url": url}}, counter.take(block, param))


def _document_part(block: JSONObject, param: str, counter: Breakpoints) -> JSONObject:
    as_object(required(block, "source", param), f"{param}.source")
    counter.take(block, param)
    return dict(block)


def _user_part(raw: object, param: str, counter: Breakpoints, *, in_tool_result: bool = False) -> JSONObject:
    block, kind = _block(raw, param)
    if kind == "text":
        return _text_part(block, param, counter)
    if kind == "image":
        return _image_part(block, param, counter)
    if kind == "document":
        return _document_part(block, param, counter)
    where = "a tool_result's content" if in_tool_result else "a user message"
    why = f"{kind!r} blocks are not supported in {where}"
    if kind in ("tool_use", "thinking", "redacted_thinking"):
        why = f"{kind!r} blocks are only allowed in assistant messages"
    raise BadRequest(f"{param}.type: {why}", param=f"{param}.type")


def core_messages(raw: object, param: str, counter: Breakpoints) -> list[Message]:
    message = as_object(raw, param)
    only_keys(message, frozenset({"role", "content"}), param)
    role = as_string(required(message, "role", param), f"{param}.role")
    content = required(message, "content", param)
    if role not in ("user", "assistant", "system"):
        raise BadRequest(f"{param}.role: Input should be 'user' or 'assistant'", param=f"{param}.role")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    blocks = as_list(content, f"{param}.content")
    if not blocks:
        raise BadRequest(f"{param}.content: List should have at least 1 item", param=f"{param}.content")
    if role == "assistant":
        return [_assistant(blocks, f"{param}.content", counter)]
    if role == "system":
        return [{"role": "system", "content": _content(_text_parts(blocks, f"{param}.content", counter))}]
    return _user(blocks, f"{param}.content", counter)


def _text_parts(blocks: list[Any], param: str, counter: Breakpoints) -> list[JSONObject]:
    return [_text_part(raw, f"{param}[{i}]", counter) for i, raw in enumerate(blocks)]


def _user(blocks: list[Any], param: str, counter: Breakpoints) -> list[Message]:
    results: list[Message] = []
    parts: list[JSONObject] = []
    for i, raw in enumerate(blocks):
        block, kind = _block(raw, f"{param}[{i}]")
        if kind == "tool_result":
            results.append(_tool_result(block, f"{param}[{i}]", counter))
        else:
            parts.append(_user_part(block, f"{param}[{i}]", counter))
    if parts:
        results.append({"role": "user", "content": _content(parts)})
    return results


def _tool_result(block: JSONObject, param: str, counter: Breakpoints) -> Message:
    only_keys(block, frozenset({"type", "tool_use_id", "content", "is_error", "cache_control", "toolset_name"}), param)
    refuse_set(block, "toolset_name", param, "MCP toolsets are not supported by this proxy")
    call_id = as_string(required(block, "tool_use_id", param), f"{param}.tool_use_id")
    raw = block.get("content", "")
    content: Any
    if isinstance(raw, str):
        content = raw
    else:
        items = as_list(raw, f"{param}.content")
        content = [
            _user_part(item, f"{param}.content[{j}]", counter, in_tool_result=True) for j, item in enumerate(items)
        ]
    marker = counter.take(block, param)
    if marker is not None:
        if isinstance(content, str) or not content:
            content = [{"type": "text", "text": content if isinstance(content, str) else ""}]
        content[-1] = {**content[-1], "cache_control": marker}
    message: Message = {"role": "tool", "tool_call_id": call_id, "content": content}
    if "is_error" in block and as_bool(block["is_error"], f"{param}.is_error"):
        message["is_error"] = True
    return message


def _assistant(blocks: list[Any], param: str, counter: Breakpoints) -> Message:
    texts: list[JSONObject] = []
    calls: list[JSONObject] = []
    thinking: list[JSONObject] = []
    reasoning: list[str] = []
    for i, raw in enumerate(blocks):
        at = f"{param}[{i}]"
        block, kind = _block(raw, at)
        if kind == "text":
            texts.append(_text_part(block, at, counter))
        elif kind == "tool_use":
            calls.append(_tool_call(block, at, counter))
        elif kind == "thinking":
            only_keys(block, frozenset({"type", "thinking", "signature"}), at)
            text = as_string(required(block, "thinking", at), f"{at}.thinking")
            signature = as_string(required(block, "signature", at), f"{at}.signature")
            reasoning.append(text)
            if signature:
                thinking.append({"type": "thinking", "thinking": text, "signature": signature})
        elif kind == "redacted_thinking":
            only_keys(block, frozenset({"type", "data"}), at)
            thinking.append({"type": "redacted_thinking", "data": as_string(required(block, "data", at), f"{at}.data")})
        else:
            why = (
                _SERVER_BLOCKS if kind.endswith(("_tool_use", "_tool_result")) else "not allowed in assistant messages"
            )
            raise BadRequest(f"{at}.type: {kind!r} {why}", param=f"{at}.type")
    message: Message = {"role": "assistant", "content": _content(texts)}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["thinking_blocks"] = thinking
    if "".join(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    return message


def _tool_call(block: JSONObject, param: str, counter: Breakpoints) -> JSONObject:
    only_keys(block, frozenset({"type", "id", "name", "input", "cache_control", "caller", "toolset_name"}), param)
    refuse_set(block, "toolset_name", param, "MCP toolsets are not supported by this proxy")
    if block.get("caller") not in (None, {"type": "direct"}):
        raise BadRequest(f"{param}.caller: programmatic tool calling is not supported", param=f"{param}.caller")
    call_id = as_string(required(block, "id", param), f"{param}.id")
    name = as_string(required(block, "name", param), f"{param}.name")
    arguments = as_object(required(block, "input", param), f"{param}.input")
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }
    return marked(call, counter.take(block, param))
