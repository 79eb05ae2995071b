"""The Anthropic dialect: the core's Chat Completions request and answer, spoken to Anthropic's Messages API.

Pure translation, both ways: `to_messages_body` turns a core request into a Messages
body; `completion_from_message` turns a Messages answer into a `chat.completion`;
`ChunkTranslator` turns Messages stream events into `chat.completion.chunk` dicts; and
`error_from_anthropic` turns an Anthropic error answer into OpenAI's error JSON.

The HTTP side: POST the body to `MESSAGES_PATH` under the upstream's base URL, with
the headers `x-api-key: <key>` (the API now also takes `Authorization: Bearer <key>`, which
the SDK sends), `anthropic-version: 2023-06-01`
and `content-type: application/json`; a beta feature (context editing, compaction)
also needs `anthropic-beta: <name>[,<name>...]`. A stream is SSE whose `event:` name
equals the `type` of its `data:`.
"""

from __future__ import annotations

import re
import time
from typing import Any

import orjson

from proxy.dialects.anthropic_cache import cap_breakpoints, mark_summary
from proxy.errors import BadRequest
from proxy.types import JSONObject, Message

MESSAGES_PATH = "/v1/messages"
ANTHROPIC_VERSION = "2023-06-01"
OPENING_USER_TEXT = "(conversation start)"
"""The user turn put before a conversation that opens with the assistant: Messages must open with a user
turn, and a text block may not be empty."""
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576, "xhigh": 32768}
"""`reasoning_effort` -> `thinking.budget_tokens` (1024 is Anthropic's minimum; "none" asks for no thinking)."""
FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
                  "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}  # fmt: skip
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}  # fmt: skip
_ERROR_CODES = {"authentication_error": "invalid_api_key", "rate_limit_error": "rate_limit_exceeded"}
_TOO_LONG = re.compile(r"prompt is too long|exceed context limit")
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


def to_messages_body(chat_body: JSONObject, *, default_max_tokens: int) -> JSONObject:
    """A core (Chat Completions) request as a Messages body.

    - system/developer messages, wherever they stand, become `system` in order: one
      string (texts joined by a blank line), or text blocks when any part carries
      `cache_control`;
    - the other messages become alternating user/assistant turns (see `_turns`); a
      conversation that opens with the assistant gets `OPENING_USER_TEXT` before it;
    - `max_tokens` is always set: `max_completion_tokens`, else `max_tokens`, else
      `default_max_tokens` (plus the thinking budget, when `reasoning_effort` adds one);
    - `reasoning_effort` -> `thinking: {"type": "enabled", "budget_tokens": THINKING_BUDGETS[...]}`,
      the budget held under a client's `max_tokens`; no thinking for "none", when fewer
      than 1024 tokens would be left for it, or where Anthropic refuses thinking: a
      forced tool, or a last assistant turn that calls tools without opening with a
      thinking block (a tool round begun by another model);
    - `stop` -> `stop_sequences`, `temperature` (held to Anthropic's 0..1), `top_p`,
      `stream`, `user` (or `safety_identifier`) -> `metadata.user_id`, tools and
      `tool_choice` / `parallel_tool_calls` (see `_tools`, `_tool_choice`);
    - the `anthropic` extras are merged last, as they are (they win over the above);
    - prompt caching (`anthropic_cache`): `cache_control` stays on the blocks it came on (a
      tool call's on its `tool_use`, a tool's on the tool, a tool message's last part's on its
      `tool_result`), the window's summary gets a breakpoint, and at most four are sent.

    Dropped, having no Messages equivalent: `n`, `logprobs`, `top_logprobs`,
    `response_format`, `stream_options`, `frequency_penalty`, `presence_penalty`, `seed`,
    `logit_bias`, `modalities`, `audio`, `prediction`, `store`, OpenAI's `metadata` and
    `service_tier`, `prompt_cache_key`, `web_search_options`, `verbosity`, the legacy
    `functions` / `function_call`, and any other field not named here.

    Raises `BadRequest` for what Messages cannot carry: a content part other than text,
    image_url, document or a data-URL file; a tool that is not a function.
    """
    system, rest = _split_system(chat_body.get("messages") or [])
    rest, summary = mark_summary(rest)
    body: JSONObject = {"model": chat_body.get("model")}
    if system:
        body["system"] = system
    body["messages"] = _turns(rest)
    tools = [_tool(tool, index) for index, tool in enumerate(chat_body.get("tools") or ())]
    choice = _tool_choice(chat_body.get("tool_choice"), chat_body.get("parallel_tool_calls")) if tools else None
    if tools:
        body["tools"] = tools
    if choice is not None:
        body["tool_choice"] = choice
    asked = chat_body.get("max_completion_tokens") or chat_body.get("max_tokens")
    body["max_tokens"] = int(asked or default_max_tokens)
    budget = THINKING_BUDGETS.get(str(chat_body.get("reasoning_effort")))
    if budget is not None and (choice or {}).get("type") not in ("any", "tool") and not _unthought(body["messages"]):
        if asked:
            budget = min(budget, body["max_tokens"] - 1)
        else:
            body["max_tokens"] += budget
        if budget >= THINKING_BUDGETS["minimal"]:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    stop = chat_body.get("stop")
    stops = [s for s in ([stop] if isinstance(stop, str) else stop or ()) if s]
    if stops:
        body["stop_sequences"] = stops
    if chat_body.get("temperature") is not None:
        body["temperature"] = min(max(float(chat_body["temperature"]), 0.0), 1.0)
    for name in ("top_p", "stream"):
        if chat_body.get(name) is not None:
            body[name] = chat_body[name]
    user = chat_body.get("user") or chat_body.get("safety_identifier")
    if user:
        body["metadata"] = {"user_id": str(user)}
    body.update(chat_body.get("anthropic") or {})
    cap_breakpoints(body, summary)
    return body


def _split_system(messages: list[Message]) -> tuple[str | list[JSONObject] | None, list[Message]]:
    blocks: list[JSONObject] = []
    rest: list[Message] = []
    for index, message in enumerate(messages):
        if message.get("role") in ("system", "developer"):
            blocks.extend(b for b in _blocks(message.get("content"), f"messages[{index}]") if b.get("text"))
        else:
            rest.append(message)
    if not blocks:
        return None, rest
    if any("cache_control" in block for block in blocks):
        return blocks, rest
    return "\n\n".join(block["text"] for block in blocks), rest


def _turns(messages: list[Message]) -> list[JSONObject]:
    """Alternating turns: tool messages become `tool_result` blocks of a user turn (before its text, as
    Anthropic requires), an assistant's `thinking_blocks` open its content verbatim and its tool calls
    follow its text as `tool_use` blocks, consecutive same-role messages share one turn, and a message
    left with no block (an empty text) is skipped."""
    turns: list[JSONObject] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        where = f"messages[{index}]"
        if role == "tool":
            role, blocks = "user", [_tool_result(message, where)]
        elif role == "assistant":
            blocks = _assistant_blocks(message, where)
        else:
            role, blocks = "user", [b for b in _blocks(message.get("content"), where) if _kept(b)]
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]})
    for turn in turns:
        if turn["role"] == "user":
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
        if len(turn["content"]) == 1 and turn["content"][0].keys() == {"type", "text"}:
            turn["content"] = turn["content"][0]["text"]
    return turns


def _unthought(turns: list[JSONObject]) -> bool:
    for turn in reversed(turns):
        if turn["role"] == "assistant":
            blocks = turn["content"] if isinstance(turn["content"], list) else []
            calls = any(block["type"] == "tool_use" for block in blocks)
            return calls and blocks[0]["type"] not in ("thinking", "redacted_thinking")
    return False


def _assistant_blocks(message: Message, where: str) -> list[JSONObject]:
    blocks = [dict(block) for block in message.get("thinking_blocks") or ()]
    blocks.extend(b for b in _blocks(message.get("content"), where) if _kept(b))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        use = {"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
               "input": _arguments(function.get("arguments"))}  # fmt: skip
        if call.get("cache_control") is not None:
            use["cache_control"] = call["cache_control"]
        blocks.append(use)
    return blocks


def _arguments(raw: Any) -> JSONObject:
    """A call's arguments JSON as `tool_use.input`; arguments that are not a JSON object (a call cut off
    mid-arguments) become `{}`, so the conversation stays sendable."""
    if isinstance(raw, dict):
        return raw
    try:
        parsed = orjson.loads(raw or "{}")
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool_result(message: Message, where: str) -> JSONObject:
    """A tool message as a `tool_result`; a breakpoint on its last part goes on the result itself
    (where the Messages door found it), its content a string again when that part was its one text."""
    content = message.get("content")
    result: JSONObject = {"type": "tool_result", "tool_use_id": message.get("tool_call_id")}
    if isinstance(content, list):
        blocks = [b for b in _blocks(content, where) if _kept(b)]
        marker = blocks[-1].pop("cache_control", None) if blocks else None
        result["content"] = blocks
        if marker is not None:
            result["cache_control"] = marker
            if len(blocks) == 1 and blocks[0].keys() == {"type", "text"}:
                result["content"] = blocks[0]["text"]
    elif content:
        result["content"] = str(content)
    if message.get("is_error"):
        result["is_error"] = True
    return result


def _kept(block: JSONObject) -> bool:
    """Anthropic refuses empty text blocks."""
    return block["type"] != "text" or bool(block["text"])


def _blocks(content: Any, where: str) -> list[JSONObject]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [_block(part, f"{where}.content[{i}]") for i, part in enumerate(content)]


def _block(part: JSONObject, where: str) -> JSONObject:
    kind = part.get("type")
    if kind in ("text", "refusal"):
        block: JSONObject = {"type": "text", "text": part.get("text") or part.get("refusal") or ""}
    elif kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        block = {"type": "image", "source": _source(str(url), where)}
    elif kind == "document":
        return dict(part)
    elif kind == "file" and _DATA_URL.match(str((part.get("file") or {}).get("file_data"))):
        block = {"type": "document", "source": _source(str(part["file"]["file_data"]), where)}
    else:
        raise BadRequest(f"A content part of type {kind!r} cannot be sent to an Anthropic model.", param=where)
    if "cache_control" in part:
        block["cache_control"] = part["cache_control"]
    return block


def _source(url: str, where: str) -> JSONObject:
    data = _DATA_URL.match(url)
    if data:
        return {"type": "base64", "media_type": data.group(1), "data": data.group(2)}
    if url.startswith(("http://", "https://")):
        return {"type": "url", "url": url}
    raise BadRequest("An image or file must be a base64 data URL or an http(s) URL.", param=where)


def _tool(tool: JSONObject, index: int) -> JSONObject:
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, dict):
        raise BadRequest("Only function tools can be sent to an Anthropic model.", param=f"tools[{index}]")
    out: JSONObject = {"name": function.get("name")}
    if function.get("description"):
        out["description"] = function["description"]
    out["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
    if function.get("strict"):
        out["strict"] = True
    cache_control = tool.get("cache_control", function.get("cache_control"))
    if cache_control is not None:
        out["cache_control"] = cache_control
    return out


def _tool_choice(choice: Any, parallel: Any) -> JSONObject | None:
    """Chat's "auto" / "none" / "required" -> auto / none / any; a named function -> `{"type": "tool", "name"}`;
    `parallel_tool_calls: false` -> `disable_parallel_tool_use` (on auto when no choice is given)."""
    if isinstance(choice, dict):
        out: JSONObject = {"type": "tool", "name": (choice.get("function") or {}).get("name")}
    elif choice in ("auto", "none", "required"):
        out = {"type": {"required": "any"}.get(choice, choice)}
    elif parallel is False:
        out = {"type": "auto"}
    else:
        return None
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def completion_from_message(message: JSONObject) -> JSONObject:
    """A Messages answer as a `chat.completion` with one choice in normal form (see `_assistant`);
    `finish_reason` from `FINISH_REASONS` and the choice's `stop_sequence`; usage as `usage_from_anthropic`."""
    choice: JSONObject = {"index": 0, "message": _assistant(message.get("content") or []), "logprobs": None,
                          "finish_reason": FINISH_REASONS.get(message.get("stop_reason") or "end_turn", "stop")}  # fmt: skip
    if message.get("stop_sequence"):
        choice["stop_sequence"] = message["stop_sequence"]
    return {"id": message.get("id"), "object": "chat.completion", "created": int(time.time()),
            "model": message.get("model"), "choices": [choice], "usage": usage_from_anthropic(message.get("usage"))}  # fmt: skip


def _assistant(content: list[JSONObject]) -> Message:
    """Text blocks -> `content` (a string for one, text parts for several, None for none); `tool_use` ->
    `tool_calls`; thinking and redacted_thinking blocks -> `thinking_blocks` verbatim, their text also
    in `reasoning_content`. Server tool blocks are not carried."""
    texts = [block["text"] for block in content if block.get("type") == "text"]
    thinking = [block for block in content if block.get("type") in ("thinking", "redacted_thinking")]
    calls = [_call(block) for block in content if block.get("type") == "tool_use"]
    message: Message = {"role": "assistant", "content": _text_content(texts)}
    if calls:
        message["tool_calls"] = calls
    if thinking:
        message["thinking_blocks"] = thinking
        message["reasoning_content"] = "".join(b.get("thinking", "") for b in thinking)
    return message


def _text_content(texts: list[str]) -> str | list[JSONObject] | None:
    if not texts:
        return None
    return texts[0] if len(texts) == 1 else [{"type": "text", "text": text} for text in texts]


def _call(block: JSONObject) -> JSONObject:
    arguments = orjson.dumps(block.get("input") or {}).decode()
    return {"id": block.get("id"), "type": "function", "function": {"name": block.get("name"), "arguments": arguments}}


def usage_from_anthropic(usage: JSONObject | None) -> JSONObject:
    """Anthropic's usage in OpenAI's terms: the prompt is the uncached input plus what was read from and
    written to the cache; `cached_tokens` is what was read; Anthropic's two cache figures are kept."""
    usage = usage or {}
    read = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    prompt = int(usage.get("input_tokens") or 0) + read + written
    completion = int(usage.get("output_tokens") or 0)
    thinking = int((usage.get("output_tokens_details") or {}).get("thinking_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": read},
            "completion_tokens_details": {"reasoning_tokens": thinking},
            "cache_creation_input_tokens": written, "cache_read_input_tokens": read}  # fmt: skip


class ChunkTranslator:
    """One Messages stream -> chat.completion.chunk dicts, fed one event at a time.

    Every chunk carries the `id`, `created` and `model` of `message_start`. Text and
    thinking text stream as `content` / `reasoning_content` deltas; a thinking block
    travels whole, with its signature, as a `thinking_blocks` delta when it stops (a
    redacted one when it starts); a tool_use block opens a `tool_calls` entry (index,
    id, name, arguments "") and its `input_json_delta`s extend the arguments;
    `message_delta` gives the finish chunk; `message_stop` the usage-only chunk
    (`choices: []`), with the input figures of `message_start` and the (cumulative)
    figures of `message_delta` over them. An `error` event becomes OpenAI's mid-stream
    error chunk `{"error": {...}}`, which carries nothing else.
    """

    def __init__(self) -> None:
        self._head: JSONObject = {"object": "chat.completion.chunk"}
        self._usage: JSONObject = {}
        self._thinking: dict[int, JSONObject] = {}
        self._calls: dict[int, int] = {}
        """A tool_use block's index in the message -> its index among the tool calls."""

    def feed(self, event: str, data: JSONObject) -> list[JSONObject]:
        """The chunks of one event; `event` may be "" (then `data["type"]` names it)."""
        kind = event or str(data.get("type"))
        if kind == "message_start":
            message = data.get("message") or {}
            self._head.update(id=message.get("id"), created=int(time.time()), model=message.get("model"))
            self._usage = dict(message.get("usage") or {})
            return [self._delta({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            return self._start(int(data.get("index", 0)), data.get("content_block") or {})
        if kind == "content_block_delta":
            return self._extend(int(data.get("index", 0)), data.get("delta") or {})
        if kind == "content_block_stop":
            block = self._thinking.pop(int(data.get("index", 0)), None)
            return [self._delta({"thinking_blocks": [block]})] if block is not None else []
        if kind == "message_delta":
            self._usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
            delta = data.get("delta") or {}
            choice = {"index": 0, "delta": {}, "logprobs": None,
                      "finish_reason": FINISH_REASONS.get(delta.get("stop_reason") or "end_turn", "stop")}  # fmt: skip
            if delta.get("stop_sequence"):
                choice["stop_sequence"] = delta["stop_sequence"]
            return [{**self._head, "choices": [choice]}]
        if kind == "message_stop":
            return [{**self._head, "choices": [], "usage": usage_from_anthropic(self._usage)}]
        if kind == "error":
            error = data.get("error") or {}
            return [{"error": {"message": error.get("message", ""), "type": error.get("type", "api_error"),
                               "code": None, "param": None}}]  # fmt: skip
        return []

    def _start(self, index: int, block: JSONObject) -> list[JSONObject]:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            return [self._delta({"content": block["text"]})]
        if kind == "thinking":
            self._thinking[index] = {"type": "thinking", "thinking": block.get("thinking") or "",
                                     "signature": block.get("signature") or ""}  # fmt: skip
            return [self._delta({"reasoning_content": block["thinking"]})] if block.get("thinking") else []
        if kind == "redacted_thinking":
            return [self._delta({"thinking_blocks": [dict(block)]})]
        if kind == "tool_use":
            self._calls[index] = len(self._calls)
            call = {"index": self._calls[index], "id": block.get("id"), "type": "function",
                    "function": {"name": block.get("name"), "arguments": ""}}  # fmt: skip
            return [self._delta({"tool_calls": [call]})]
        return []

    def _extend(self, index: int, delta: JSONObject) -> list[JSONObject]:
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [self._delta({"content": delta["text"]})]
        if kind == "thinking_delta" and index in self._thinking:
            self._thinking[index]["thinking"] += delta.get("thinking") or ""
            return [self._delta({"reasoning_content": delta["thinking"]})] if delta.get("thinking") else []
        if kind == "signature_delta" and index in self._thinking:
            self._thinking[index]["signature"] = delta.get("signature") or ""
        if kind == "input_json_delta" and index in self._calls and delta.get("partial_json"):
            call = {"index": self._calls[index], "function": {"arguments": delta["partial_json"]}}
            return [self._delta({"tool_calls": [call]})]
        return []

    def _delta(self, delta: JSONObject) -> JSONObject:
        return {**self._head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}


def error_from_anthropic(status: int, body: bytes) -> bytes:
    """An Anthropic error answer (`{"type": "error", "error": {"type", "message"}}`) as OpenAI's error JSON.

    The type is kept (invalid_request_error, authentication_error, rate_limit_error,
    overloaded_error, ...); `code` is `context_length_exceeded` for a prompt over the
    window, `invalid_api_key` for authentication_error, `rate_limit_exceeded` for
    rate_limit_error, else null. A body that is not Anthropic's error JSON keeps its
    text as the message, with the type Anthropic uses for that status.
    """
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message, kind = error["message"], str(error.get("type") or _status_type(status))
    else:
        message = body.decode(errors="replace").strip()[:2000] or f"The upstream answered HTTP {status}."
        kind = _status_type(status)
    code = "context_length_exceeded" if _TOO_LONG.search(message) else _ERROR_CODES.get(kind)
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


def _status_type(status: int) -> str:
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
