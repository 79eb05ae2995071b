"""Reading and validating a chat completions request body.

Bad input is answered 400 in OpenAI's shape with `param` naming the field, before
anything is stored or forwarded. Only what the proxy relies on is checked; other
fields go upstream untouched for the upstream to judge.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from proxy.doors.resent import ResentBodies
from proxy.errors import BadRequest, PayloadTooLarge
from proxy.handlers.encoding import decode_body
from proxy.turn import ChatRequest

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_NEEDS_CONTENT = ("system", "developer", "user", "tool")
_PLAIN_ROLES = frozenset(("system", "developer", "user", "assistant"))
_SHOWN_CHARS = 60


async def read_body(request: web.Request, limit: int) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"request body is {request.content_length} bytes; the limit is {limit}")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise PayloadTooLarge(f"request body is over the limit of {limit} bytes") from exc
    return decode_body(raw, request.headers.get("Content-Encoding"), limit)


_WRITABLE_DEPTH = 254
"""orjson reads 1024 levels of nesting but writes only 254: a body nested deeper cannot be sent on."""


def parse_json(raw: bytes) -> Any:
    """A request body as JSON, for every door: bad JSON, or JSON nested too deeply to send on,
    is a 400 (the nesting is checked only when the body has enough brackets to reach it)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}", code="invalid_json") from exc
    if raw.count(b"[") + raw.count(b"{") > _WRITABLE_DEPTH:
        try:
            orjson.dumps(body)
        except orjson.JSONEncodeError as exc:
            raise BadRequest(f"request body is nested too deeply to forward: {exc}", code="invalid_json") from exc
    return body


def parse_chat_request(raw: bytes, bodies: ResentBodies | None = None, tenant: str = "") -> ChatRequest:
    """The request in `raw`, checked; with `bodies`, a conversation resent from a body the
    tenant sent lately is not parsed and checked again (`proxy/doors/resent.py`)."""
    body, checked = _parsed(raw, bodies, tenant)
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object", code="invalid_type")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' must be a non-empty string", param="model", code="invalid_type")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(
            "'messages' must be a non-empty array of message objects", param="messages", code="invalid_type"
        )
    for index in range(checked, len(messages)):
        if not _plain(messages[index]):
            _check_message(messages[index], f"messages[{index}]")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest("'stream' must be a boolean", param="stream", code="invalid_type")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object", param="stream_options", code="invalid_type")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):  # the proxy may add its own tools to the client's
        raise BadRequest("'tools' must be an array of tool objects", param="tools", code="invalid_type")
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise BadRequest(f"'{key}' must be a positive integer", param=key, code="invalid_type")
    include_usage = bool(stream and options and options.get("include_usage") is True)
    if bodies is not None:
        bodies.remember(raw, tenant, body, messages, resent=checked > 0)
    return ChatRequest(body, raw, model, messages, bool(stream), include_usage)


def _parsed(raw: bytes, bodies: ResentBodies | None, tenant: str) -> tuple[Any, int]:
    """The body, and how many of its first messages were checked already (in an earlier body).

    Anything unusual in the part after a resent prefix (not JSON, nested too deeply) is left to
    the whole body's parse, so its error is the one the body as a whole gets."""
    resent = bodies.find(raw, tenant) if bodies is not None else None
    if resent is not None:
        try:
            rest = parse_json(resent.rest)
        except BadRequest:
            rest = None
        if isinstance(rest, dict) and isinstance(rest.get("messages"), list) and resent.compact(rest):
            messages = [*resent.messages, *rest.pop("messages")]
            return {**resent.before, "messages": messages, **rest}, len(resent.messages)
    return parse_json(raw), 0


def _plain(message: Any) -> bool:
    """A role and a text content, nothing else: valid without the full check (most messages).

    Every value is type-checked before it is used (a role that is an object is not
    hashable), so anything this accepts the full check accepts too."""
    if type(message) is not dict or len(message) != 2 or type(message.get("content")) is not str:
        return False
    role = message.get("role")
    return type(role) is str and role in _PLAIN_ROLES


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise BadRequest(f"'{where}' must be an object", param=where, code="invalid_type")
    role = message.get("role")
    if role not in ROLES:
        raise BadRequest(
            f"'{where}.role' must be one of {', '.join(ROLES)}, got {_shown(role)}",
            param=f"{where}.role",
            code="invalid_value",
        )
    content = message.get("content")
    if content is None:
        if role in _NEEDS_CONTENT:
            raise BadRequest(f"'{where}.content' is required for role {role}", param=f"{where}.content")
    elif isinstance(content, list):
        for index, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise BadRequest(
                    f"'{where}.content[{index}]' must be an object with a 'type'", param=f"{where}.content[{index}]"
                )
    elif not isinstance(content, str):
        raise BadRequest(f"'{where}.content' must be a string or an array of parts", param=f"{where}.content")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise BadRequest(f"'{where}.tool_call_id' must be a string", param=f"{where}.tool_call_id")
    if "pinned" in message and not isinstance(message["pinned"], bool):
        raise BadRequest(f"'{where}.pinned' must be a boolean", param=f"{where}.pinned")
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            raise BadRequest(
                f"'{where}.tool_calls' must be an array on an assistant message", param=f"{where}.tool_calls"
            )
        for index, call in enumerate(calls):
            _check_tool_call(call, f"{where}.tool_calls[{index}]")
    for key in ("name", "tool_call_id"):
        if key in message and not isinstance(message[key], str):
            raise BadRequest(f"'{where}.{key}' must be a string", param=f"{where}.{key}")


def _shown(value: Any) -> str:
    """A client's value in an error message, cut short (a role can be a megabyte of JSON)."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _check_tool_call(call: Any, where: str) -> None:
    function = call.get("function") if isinstance(call, dict) else None
    if not (
        isinstance(call, dict)
        and isinstance(call.get("id"), str)
        and isinstance(function, dict)
        and isinstance(function.get("name"), str)
        and isinstance(function.get("arguments"), str)
    ):
        raise BadRequest(
            f"'{where}' must be an object with a string 'id' and a 'function' with string 'name' and 'arguments'",
            param=where,
        )
