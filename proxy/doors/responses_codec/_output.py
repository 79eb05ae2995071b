"""Core answers and messages -> Responses items, usage and the Response object.

Item ids are derived from the response id and the item's rank among items of its kind
(`msg_<id>_0`, `fc_<id>_1`, ...), so an answer's items get the same ids whether it was
streamed or not, and a stored response lists the ids its stream showed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from proxy.doors.responses_codec._request import ResponsesCall
from proxy.types import JSONObject, Message


def item_id(prefix: str, response_id: str, tag: int | str) -> str:
    return f"{prefix}_{response_id.removeprefix('resp_')}_{tag}"


def text_part(text: str) -> JSONObject:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, parts: list[JSONObject], status: str = "completed") -> JSONObject:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": parts}


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> JSONObject:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def reasoning_item(item_id: str, summary: list[JSONObject]) -> JSONObject:
    return {"type": "reasoning", "id": item_id, "summary": summary}


def _text(content: Any) -> str:
    """A core message's text: its string, or its text parts joined (as the journal's identity joins them)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()


def _calls(message: Message) -> list[tuple[str | None, str, str]]:
    """(id, name, arguments) of each function call in a core assistant message."""
    out = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        out.append((call.get("id"), str(function.get("name") or ""), _arguments(function.get("arguments") or "")))
    return out


def output_items(completion_message: JSONObject, *, response_id: str) -> list[JSONObject]:
    """The core's assistant message as Responses output: reasoning (from `reasoning_content`), the
    message (its text, and a refusal part), one `function_call` per tool call. A message without text
    or calls still gets an (empty) message item, so that sent back it is still the turn's message."""
    items: list[JSONObject] = []
    reasoning = completion_message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        items.append(reasoning_item(item_id("rs", response_id, 0), [{"type": "summary_text", "text": reasoning}]))
    text = _text(completion_message.get("content"))
    refusal = completion_message.get("refusal")
    calls = _calls(completion_message)
    parts = [text_part(text)] if text or not (refusal or calls) else []
    if isinstance(refusal, str) and refusal:
        parts.append({"type": "refusal", "refusal": refusal})
    if parts:
        items.append(message_item(item_id("msg", response_id, 0), parts))
    for rank, (call_id, name, arguments) in enumerate(calls):
        items.append(
            call_item(item_id("fc", response_id, rank), call_id or item_id("call", response_id, rank), name, arguments)
        )
    return items


def usage_of(chat_usage: JSONObject | None) -> JSONObject | None:
    """Chat usage -> Responses usage (`cache_write_tokens` is 0: chat usage does not report it)."""
    if not chat_usage:
        return None
    prompt = int(chat_usage.get("prompt_tokens") or 0)
    completion = int(chat_usage.get("completion_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": int((chat_usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
            "cache_write_tokens": 0,
        },
        "output_tokens": completion,
        "output_tokens_details": {
            "reasoning_tokens": int((chat_usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
        },
        "total_tokens": int(chat_usage.get("total_tokens") or prompt + completion),
    }


def response_object(
    call: ResponsesCall,
    *,
    response_id: str,
    created_at: int,
    status: str,
    output: list[JSONObject],
    usage: JSONObject | None,
    error: JSONObject | None = None,
    incomplete_reason: str | None = None,
) -> JSONObject:
    """The Response object as OpenAI's API answers it: the request's repeated fields, then the outcome."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "model": call.model,
        "output": output,
        "usage": usage,
        **call.echo,
    }


def input_items_of(
    messages: list[Message], *, response_id: str, numbers: Sequence[int] | None = None
) -> list[JSONObject]:
    """Core messages as Responses items, with ids (tagged `in<n>`, n the message's number in
    `numbers`, else its position), as the input-item and conversation-item lists show them. Parts
    the Responses API has no input form for are left out."""
    items: list[JSONObject] = []
    for position, message in enumerate(messages):
        tag = f"in{numbers[position] if numbers is not None else position}"
        role = message.get("role")
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "id": item_id("fco", response_id, tag),
                    "call_id": str(message.get("tool_call_id") or ""),
                    "output": _text(message.get("content")),
                    "status": "completed",
                }
            )
        elif role == "assistant":
            parts = (
                [text_part(_text(message.get("content")))]
                if message.get("content") or not message.get("tool_calls")
                else []
            )
            if message.get("refusal"):
                parts.append({"type": "refusal", "refusal": str(message["refusal"])})
            if parts:
                items.append(message_item(item_id("msg", response_id, tag), parts))
            for rank, (call_id, name, arguments) in enumerate(_calls(message)):
                fc = item_id("fc", response_id, f"{tag}_{rank}")
                items.append(call_item(fc, call_id or item_id("call", response_id, f"{tag}_{rank}"), name, arguments))
        else:
            content = _input_parts(message.get("content"))
            items.append(
                {
                    "type": "message",
                    "id": item_id("msg", response_id, tag),
                    "status": "completed",
                    "role": role,
                    "content": content,
                }
            )
    return items


def _input_parts(content: Any) -> list[JSONObject]:
    if not isinstance(content, list):
        return [{"type": "input_text", "text": _text(content)}]
    parts: list[JSONObject] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"type": "input_text", "text": str(part.get("text") or "")})
        elif kind == "image_url":
            image = part.get("image_url") or {}
            parts.append(
                {"type": "input_image", "image_url": image.get("url"), "detail": image.get("detail") or "auto"}
            )
        elif kind == "file":
            file = part.get("file") or {}
            parts.append({"type": "input_file", "filename": file.get("filename"), "file_data": file.get("file_data")})
    return parts


def without_item(
    messages: list[Message], numbers: Sequence[int], item_id: str, *, response_id: str
) -> tuple[list[Message], list[int]] | None:
    """`messages` (and their `numbers`) less the item `item_id` (as `input_items_of` names it);
    None when no item has that id. A call or the text of an assistant message that holds both
    leaves the rest of that message; a message left with nothing is removed."""
    for position, message in enumerate(messages):
        items = input_items_of([message], response_id=response_id, numbers=[numbers[position]])
        ids = [item["id"] for item in items]
        if item_id not in ids:
            continue
        kept = _without(message, items, ids.index(item_id))
        rest = [m for i, m in enumerate(messages) if i != position]
        rest_numbers = [n for i, n in enumerate(numbers) if i != position]
        if kept is not None:
            rest.insert(position, kept)
            rest_numbers.insert(position, numbers[position])
        return rest, rest_numbers
    return None


def _without(message: Message, items: list[JSONObject], index: int) -> Message | None:
    """The message less its `index`th item; None when nothing of it is left."""
    if message.get("role") != "assistant":
        return None
    calls = list(message.get("tool_calls") or [])
    if items[index]["type"] == "message":
        kept: Message = {k: v for k, v in message.items() if k not in ("content", "refusal")}
        kept["content"] = None
    else:
        del calls[index - sum(1 for item in items if item["type"] == "message")]
        kept = {**message, "tool_calls": calls}
        if not calls:
            del kept["tool_calls"]
    return kept if kept.get("content") or kept.get("refusal") or kept.get("tool_calls") else None
