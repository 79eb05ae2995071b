"""Responses input items -> core (Chat Completions) messages.

A `message` item is a message; a `function_call` item joins the assistant message before it
(one message: its text and its calls), so the output items of an answer, sent back as input,
give the very message the journal recorded; `function_call_output` is a `tool` message.
`reasoning` items are dropped (the core keeps messages only, and no upstream could use an
OpenAI reasoning item); `compaction` items are returned apart for the glue to restore.
`item_reference` is refused: the codec sees no stored items. Fields of input items that are
repeated output (`id`, `status`, `annotations`, `logprobs`, `phase`) are accepted and dropped;
any other unknown field is a 400, as at OpenAI.
"""

from __future__ import annotations

from typing import Any

from proxy.doors.responses_codec._checks import (
    at,
    choice,
    invalid_type,
    missing,
    obj,
    string,
    unsupported,
)
from proxy.types import JSONObject, Message

_ROLES = ("user", "assistant", "system", "developer")
_MESSAGE_KEYS = frozenset({"type", "role", "content", "id", "status", "phase"})
_CALL_KEYS = frozenset({"type", "id", "call_id", "name", "arguments", "status"})
_OUTPUT_KEYS = frozenset({"type", "id", "call_id", "output", "status"})
_REASONING_KEYS = frozenset({"type", "id", "summary", "content", "encrypted_content", "status"})
_COMPACTION_KEYS = frozenset({"type", "id", "encrypted_content", "created_by"})
_TEXT_KEYS = frozenset({"type", "text", "prompt_cache_breakpoint"})
_IMAGE_KEYS = frozenset({"type", "image_url", "file_id", "detail", "prompt_cache_breakpoint"})
_FILE_KEYS = frozenset({"type", "file_id", "filename", "file_data", "file_url", "detail", "prompt_cache_breakpoint"})
_OUTPUT_TEXT_KEYS = frozenset({"type", "text", "annotations", "logprobs"})
_REFUSAL_KEYS = frozenset({"type", "refusal"})
_INPUT_PARTS = ("input_text", "input_image", "input_file")
_NO_STORE = "the proxy keeps no item store; send the item itself, or continue with previous_response_id or conversation"


class _Input:
    """Core messages built item by item; `compactions` as (position in `messages`, encrypted_content)."""

    def __init__(self, messages: list[Message], *, compactions_allowed: bool) -> None:
        self.messages = messages
        self.compactions: list[tuple[int, str]] = []
        self._compactions_allowed = compactions_allowed
        self._assistant: Message | None = None
        """The assistant message a following `function_call` item joins."""

    def add(self, item: object, path: str) -> None:
        if not isinstance(item, dict):
            raise invalid_type(path, "an object", item)
        kind = string(item, "type", path)
        if kind in (None, "message"):
            self._message(item, path)
        elif kind == "function_call":
            self._call(obj(item, path, _CALL_KEYS), path)
        elif kind == "function_call_output":
            self._output(obj(item, path, _OUTPUT_KEYS), path)
        elif kind == "reasoning":
            obj(item, path, _REASONING_KEYS)
        elif kind == "compaction" and self._compactions_allowed:
            content = string(obj(item, path, _COMPACTION_KEYS), "encrypted_content", path, required=True)
            self.compactions.append((len(self.messages), str(content)))
            self._assistant = None
        elif kind == "item_reference":
            raise unsupported(at(path, "type"), f"item_reference: {_NO_STORE}")
        else:
            raise unsupported(at(path, "type"), f"{kind!r} items (only messages and function calls)")

    def _message(self, item: JSONObject, path: str) -> None:
        obj(item, path, _MESSAGE_KEYS)
        role = choice(item, "role", path, _ROLES)
        if role is None:
            raise missing(at(path, "role"))
        content = item.get("content")
        if content is None:
            raise missing(at(path, "content"))
        where = at(path, "content")
        if not isinstance(content, (str, list)):
            raise invalid_type(where, "a string or an array of content parts", content)
        if role == "assistant":
            message = _assistant_message(content, where)
            self._assistant = message
        else:
            message = {"role": role, "content": _input_content(content, where, text_only=role != "user")}
            self._assistant = None
        self.messages.append(message)

    def _call(self, item: JSONObject, path: str) -> None:
        call_id = string(item, "call_id", path, required=True)
        name = string(item, "name", path, required=True)
        arguments = string(item, "arguments", path, required=True)
        if self._assistant is None:
            self._assistant = {"role": "assistant", "content": None}
            self.messages.append(self._assistant)
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        self._assistant.setdefault("tool_calls", []).append(call)

    def _output(self, item: JSONObject, path: str) -> None:
        call_id = string(item, "call_id", path, required=True)
        output = item.get("output")
        where = at(path, "output")
        if output is None:
            raise missing(where)
        if not isinstance(output, (str, list)):
            raise invalid_type(where, "a string or an array of content parts", output)
        self.messages.append(
            {"role": "tool", "tool_call_id": call_id, "content": _input_content(output, where, text_only=True)}
        )
        self._assistant = None


def _assistant_message(content: str | list[Any], path: str) -> Message:
    """The normal form: content is the joined output_text or null, refusal parts joined apart."""
    texts: list[str] = []
    refusals: list[str] = []
    for index, part in enumerate([{"type": "output_text", "text": content}] if isinstance(content, str) else content):
        where = at(path, index)
        if not isinstance(part, dict):
            raise invalid_type(where, "an object", part)
        kind = choice(part, "type", where, ("output_text", "refusal"))
        if kind == "output_text":
            texts.append(str(string(obj(part, where, _OUTPUT_TEXT_KEYS), "text", where, required=True)))
        elif kind == "refusal":
            refusal = string(obj(part, where, _REFUSAL_KEYS), "refusal", where, required=True)
            refusals.append(str(refusal))
        else:
            raise missing(at(where, "type"))
    message: Message = {"role": "assistant", "content": "".join(texts) or None}
    if refusals:
        message["refusal"] = "".join(refusals)
    return message


def _input_content(content: str | list[Any], path: str, *, text_only: bool = False) -> Any:
    """A string stays a string, so do text-only parts (joined); images and files become chat parts."""
    if isinstance(content, str):
        return content
    parts: list[JSONObject] = []
    for index, part in enumerate(content):
        where = at(path, index)
        if not isinstance(part, dict):
            raise invalid_type(where, "an object", part)
        kind = choice(part, "type", where, _INPUT_PARTS)
        if kind is None:
            raise missing(at(where, "type"))
        if kind == "input_text":
            parts.append({"type": "text", "text": string(obj(part, where, _TEXT_KEYS), "text", where, required=True)})
        elif text_only:
            raise unsupported(at(where, "type"), f"{kind} here (the chat core takes only text in this place)")
        elif kind == "input_image":
            parts.append(_image_part(obj(part, where, _IMAGE_KEYS), where))
        else:
            parts.append(_file_part(obj(part, where, _FILE_KEYS), where))
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _image_part(part: JSONObject, path: str) -> JSONObject:
    if string(part, "file_id", path) is not None:
        raise unsupported(at(path, "file_id"), "file ids name OpenAI-stored files; send image_url (a data URL)")
    image: JSONObject = {"url": string(part, "image_url", path, required=True)}
    detail = choice(part, "detail", path, ("low", "high", "auto", "original"))
    if detail is not None:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def _file_part(part: JSONObject, path: str) -> JSONObject:
    for key in ("file_id", "file_url"):
        if string(part, key, path) is not None:
            raise unsupported(at(path, key), "only inline files (file_data with filename) reach the upstream")
    choice(part, "detail", path, ("low", "high", "auto"))
    data = string(part, "file_data", path, required=True)
    return {"type": "file", "file": {"filename": string(part, "filename", path, required=True), "file_data": data}}


def parse_items(
    items: list[Any], path: str, messages: list[Message] | None = None, *, compactions_allowed: bool = False
) -> tuple[list[Message], list[tuple[int, str]]]:
    """Input items -> core messages appended to `messages`, and the compactions among them."""
    built = _Input(messages if messages is not None else [], compactions_allowed=compactions_allowed)
    for index, item in enumerate(items):
        built.add(item, at(path, index))
    return built.messages, built.compactions


def parse_input(value: object, messages: list[Message]) -> tuple[list[Message], list[tuple[int, str]]]:
    """A request's `input` (a string: one user message; or a list of items; or absent) appended to
    `messages`, and the (position, encrypted_content) of each compaction item among it."""
    if isinstance(value, str):
        messages.append({"role": "user", "content": value})
        return messages, []
    if value is None or isinstance(value, list):
        return parse_items(value or [], "input", messages, compactions_allowed=True)
    raise invalid_type("input", "a string or an array of input items", value)
