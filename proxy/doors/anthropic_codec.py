"""Anthropic's Messages API as a client speaks it (Claude Code, the anthropic SDK), to and from the core.

Pure translation, no I/O; the door's one entry point (the answer side lives in
`anthropic_answer`, the blocks in `anthropic_content`, the field checks in
`anthropic_fields`, and is re-exported here). `parse_request` validates a `POST /v1/messages` body with
Anthropic's rules and turns it into a core request (a Chat Completions body);
`message_from_completion` and `MessageStream` turn the core's answer back into an
Anthropic Message or its SSE events; `error_body` and `MessageStream.error` give errors
Anthropic's shape. `side_request` names the requests Claude Code makes beside the
conversation. Where each Anthropic field lands in the core:

- `system` -> one leading `system` message; a `system` role inside `messages` (the SDK
  knows it) -> a `system` message in place.
- text -> text parts; image -> an `image_url` part (a data URL for a base64 source);
  document -> the block verbatim as a part; `cache_control` stays on its part.
- tool_use -> the assistant's `tool_calls` (arguments: compact JSON of `input`); a
  tool_use's `cache_control` rides on its tool call (`tool_calls[i].cache_control`),
  where the Anthropic dialect puts it back on the tool_use block.
- tool_result -> one `tool` message per result, ahead of the user's other blocks (which
  follow as a user message); `is_error: true` is kept; the result's own `cache_control`
  goes on the tool message's last content part (a string content becomes one text
  part), where it ends the cached prefix at the same place (the dialect may lift it
  back onto the tool_result block).
- thinking / redacted_thinking -> `thinking_blocks` verbatim, and `reasoning_content`
  (the thinking text). A thinking block with an empty signature is reasoning that no
  Anthropic upstream signed (see `message_from_completion`): it goes in
  `reasoning_content` only.
- a custom tool's `cache_control` rides on the chat tool object (`tools[i].cache_control`);
  `eager_input_streaming`, `input_examples` and `allowed_callers: ["direct"]` have no
  place in the core and are dropped.
- `top_k`, `thinking`, `metadata`, `service_tier`, `context_management`, `output_config`,
  `inference_geo`, `speed` and a top-level `cache_control` go verbatim into the core
  body's `anthropic` extras; `metadata.user_id` is also the core's `user`.

Refused with a 400 naming the field: server tools and their blocks, tool search
(`defer_loading`, tool_reference), MCP servers, containers, file sources, citations.
An assistant message's blocks are re-ordered thinking, text, tool_use by the core
(interleaving is not kept).
"""

from __future__ import annotations

import orjson

from proxy.doors.anthropic_answer import MessageStream, error_body, message_from_completion, message_id
from proxy.doors.anthropic_content import core_messages, system_messages
from proxy.doors.anthropic_fields import (
    Breakpoints,
    as_bool,
    as_int,
    as_list,
    as_number,
    as_object,
    as_string,
    marked,
    only_keys,
    required,
)
from proxy.errors import BadRequest
from proxy.types import JSONObject, Message, frozen

__all__ = [
    "MessageStream",
    "MessagesCall",
    "error_body",
    "message_from_completion",
    "message_id",
    "parse_request",
    "session_hint",
    "side_request",
]

_EXTRAS = (
    "top_k",
    "thinking",
    "metadata",
    "service_tier",
    "context_management",
    "output_config",
    "inference_geo",
    "speed",
    "cache_control",
)
_MESSAGES_FIELDS = frozenset(
    {"model", "max_tokens", "messages", "system", "tools", "tool_choice", "temperature", "top_p"}
    | {"stop_sequences", "stream", *_EXTRAS}
)
_COUNT_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "context_management", "output_config"}
    | {"cache_control"}
)
_UNSUPPORTED_FIELDS = {
    "mcp_servers": "MCP servers run on Anthropic's side and are not supported by this proxy",
    "container": "containers (code execution, skills) are not supported by this proxy",
}
_NULLABLE = frozenset({"cache_control", "context_management", "inference_geo", "speed"})


@frozen
class MessagesCall:
    """One Messages request, translated.

    `chat_body` is the core request. `session_hint` comes from `metadata.user_id` (see
    `session_hint`). `breakpoints` counts the `cache_control` markers the client sent
    (blocks, tools, system, and a top-level one). `max_tokens` is the client's (None on
    a count_tokens body), and `count_tokens` says the body was parsed for
    `/v1/messages/count_tokens`, which has no `max_tokens` and no sampling fields.
    """

    chat_body: JSONObject
    model: str
    stream: bool
    session_hint: str | None
    breakpoints: int
    max_tokens: int | None
    count_tokens: bool = False


def parse_request(body: object, *, count_tokens: bool = False) -> MessagesCall:
    """Validate a Messages body (or, with `count_tokens`, a count_tokens body) and translate it.

    Raises `BadRequest` whose `param` is the field path (`messages[2].content[0].type`)
    for anything Anthropic would refuse, and for what the core cannot carry.
    """
    body = as_object(body, "body")
    allowed = _COUNT_FIELDS if count_tokens else _MESSAGES_FIELDS
    for key in body:
        if key in _UNSUPPORTED_FIELDS:
            raise BadRequest(f"{key}: {_UNSUPPORTED_FIELDS[key]}", param=key)
        if key not in allowed:
            raise BadRequest(f"{key}: Extra inputs are not permitted", param=key)
    fields = {key: value for key, value in body.items() if not (value is None and key in _NULLABLE)}
    model = as_string(required(fields, "model", ""), "model")
    if not model:
        raise BadRequest("model: String should have at least 1 character", param="model")
    counter = Breakpoints()
    chat: JSONObject = {"model": model}
    max_tokens = None if count_tokens else as_int(required(fields, "max_tokens", ""), "max_tokens", minimum=1)
    if max_tokens is not None:
        chat["max_completion_tokens"] = max_tokens
    messages = system_messages(fields["system"], counter) if "system" in fields else []
    raw_messages = as_list(required(fields, "messages", ""), "messages")
    if not raw_messages:
        raise BadRequest("messages: List should have at least 1 item after validation", param="messages")
    for i, raw in enumerate(raw_messages):
        messages.extend(core_messages(raw, f"messages[{i}]", counter))
    chat["messages"] = messages
    if "tools" in fields:
        chat["tools"] = [_tool(raw, f"tools[{i}]", counter) for i, raw in enumerate(as_list(fields["tools"], "tools"))]
    if "tool_choice" in fields:
        chat.update(_tool_choice(fields["tool_choice"]))
    for key in ("temperature", "top_p"):
        if key in fields:
            chat[key] = as_number(fields[key], key, low=0.0, high=1.0)
    if "stop_sequences" in fields:
        stops = as_list(fields["stop_sequences"], "stop_sequences")
        chat["stop"] = [as_string(s, f"stop_sequences[{i}]") for i, s in enumerate(stops)]
    stream = as_bool(fields["stream"], "stream") if "stream" in fields else False
    chat["stream"] = stream
    extras = _extras(fields, counter)
    user_id = extras.get("metadata", {}).get("user_id")
    if user_id:
        chat["user"] = user_id
    if extras:
        chat["anthropic"] = extras
    return MessagesCall(
        chat_body=chat,
        model=model,
        stream=stream,
        session_hint=session_hint(user_id),
        breakpoints=counter.count,
        max_tokens=max_tokens,
        count_tokens=count_tokens,
    )


def session_hint(user_id: str | None) -> str | None:
    """The session named in Claude Code's `metadata.user_id`, else the whole value.

    Claude Code writes `user_<hash>_account_<uuid>_session_<uuid>` (the account may be
    empty), and since v2.1.78 a JSON string `{"device_id", "account_uuid", "session_id"}`.
    """
    if not user_id:
        return None
    if user_id.startswith("{"):
        try:
            parsed = orjson.loads(user_id)
        except orjson.JSONDecodeError:
            return user_id
        found = parsed.get("session_id") if isinstance(parsed, dict) else None
        return found if isinstance(found, str) and found else user_id
    _, marker, tail = user_id.rpartition("_session_")
    return tail if marker and tail else user_id


_TOOL_FIELDS = frozenset(
    {"type", "name", "description", "input_schema", "cache_control", "strict", "eager_input_streaming"}
    | {"input_examples", "defer_loading", "allowed_callers"}
)


def _tool(raw: object, param: str, counter: Breakpoints) -> JSONObject:
    tool = as_object(raw, param)
    kind = tool.get("type")
    if kind not in (None, "custom"):
        why = f"server tool {kind!r} is not supported by this proxy (only custom tools with an input_schema)"
        raise BadRequest(f"{param}: {why}", param=param)
    only_keys(tool, _TOOL_FIELDS, param)
    if tool.get("defer_loading") not in (None, False):
        raise BadRequest(
            f"{param}.defer_loading: tool search is not supported by this proxy", param=f"{param}.defer_loading"
        )
    if tool.get("allowed_callers") not in (None, ["direct"]):
        why = "programmatic tool calling is not supported by this proxy"
        raise BadRequest(f"{param}.allowed_callers: {why}", param=f"{param}.allowed_callers")
    name = as_string(required(tool, "name", param), f"{param}.name")
    if not name:
        raise BadRequest(f"{param}.name: String should have at least 1 character", param=f"{param}.name")
    function: JSONObject = {"name": name}
    if "description" in tool:
        function["description"] = as_string(tool["description"], f"{param}.description")
    function["parameters"] = as_object(required(tool, "input_schema", param), f"{param}.input_schema")
    if "strict" in tool:
        function["strict"] = as_bool(tool["strict"], f"{param}.strict")
    if tool.get("eager_input_streaming") is not None:
        as_bool(tool["eager_input_streaming"], f"{param}.eager_input_streaming")
    if "input_examples" in tool:
        as_list(tool["input_examples"], f"{param}.input_examples")
    return marked({"type": "function", "function": function}, counter.take(tool, param))


def _tool_choice(value: object) -> JSONObject:
    choice = as_object(value, "tool_choice")
    kind = as_string(required(choice, "type", "tool_choice"), "tool_choice.type")
    fields = {"none": frozenset({"type"}), "auto": frozenset({"type", "disable_parallel_tool_use"})}
    fields["any"] = fields["auto"]
    fields["tool"] = fields["auto"] | {"name"}
    if kind not in fields:
        why = "Input should be 'auto', 'any', 'tool' or 'none'"
        raise BadRequest(f"tool_choice.type: {why}", param="tool_choice.type")
    only_keys(choice, fields[kind], "tool_choice")
    out: JSONObject = {"tool_choice": {"auto": "auto", "any": "required", "none": "none"}.get(kind)}
    if kind == "tool":
        name = as_string(required(choice, "name", "tool_choice"), "tool_choice.name")
        out["tool_choice"] = {"type": "function", "function": {"name": name}}
    if "disable_parallel_tool_use" in choice:
        disable = as_bool(choice["disable_parallel_tool_use"], "tool_choice.disable_parallel_tool_use")
        out["parallel_tool_calls"] = not disable
    return out


def _extras(fields: JSONObject, counter: Breakpoints) -> JSONObject:
    extras = {key: fields[key] for key in _EXTRAS if key in fields}
    if "top_k" in extras:
        as_int(extras["top_k"], "top_k", minimum=0)
    for key in ("thinking", "context_management", "output_config", "metadata"):
        if key in extras:
            as_object(extras[key], key)
    if "thinking" in extras:
        as_string(required(extras["thinking"], "type", "thinking"), "thinking.type")
    for key in ("service_tier", "inference_geo", "speed"):
        if key in extras:
            as_string(extras[key], key)
    if "metadata" in extras:
        only_keys(extras["metadata"], frozenset({"user_id"}), "metadata")
        if extras["metadata"].get("user_id") is not None:
            as_string(extras["metadata"]["user_id"], "metadata.user_id")
    counter.take(fields, "")
    return extras


# -- Claude Code's requests beside the conversation -----------------------------------------------------------------

_SIDE_MARKERS = (
    ("title", ("new conversation topic", "word title", "succinct title", "title for the conversation")),
    ("command_prefix", ("command_injection_detected",)),
)
_COMPACT_MARKERS = ("detailed summary of the conversation so far", "continuation summary for future context window")


def side_request(call: MessagesCall) -> str | None:
    """The kind of a request that must not create a session nor enter the conversation, else None.

    The rule, first match wins:
    1. `count_tokens`: a `/v1/messages/count_tokens` body.
    2. `probe`: `max_tokens` is 1 (Claude Code's quota check: `"quota"` to the small model).
    3. `warmup`: one user message whose text is `Warmup` (Claude Code priming a subagent's cache).
    4. With no tools (Claude Code's conversation always has tools), the system prompt or the
       first user message carries a marker of a utility prompt: `title` (topic detection,
       "write a 5-10 word title", session title and branch), `command_prefix` (the Bash
       command prefix and injection check).
    5. `compact`: the last user message asks for Claude Code's conversation summary
       ("create a detailed summary of the conversation so far"), tools or not.
    """
    if call.count_tokens:
        return "count_tokens"
    if call.max_tokens == 1:
        return "probe"
    messages = call.chat_body["messages"]
    users = [m for m in messages if m["role"] == "user"]
    others = [m for m in messages if m["role"] not in ("user", "system")]
    if len(users) == 1 and not others and _text(users[0]).strip() == "Warmup":
        return "warmup"
    if not call.chat_body.get("tools"):
        system = " ".join(_text(m) for m in messages if m["role"] == "system").lower()
        first = _text(users[0]).lower() if users else ""
        for kind, markers in _SIDE_MARKERS:
            if any(marker in system or marker in first for marker in markers):
                return kind
    last = _text(users[-1]).lower() if users else ""
    return "compact" if any(marker in last for marker in _COMPACT_MARKERS) else None


def _text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(p["text"] for p in content or [] if p.get("type") == "text")
