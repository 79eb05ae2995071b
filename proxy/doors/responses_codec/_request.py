"""`POST /v1/responses` -> a core request (a Chat Completions body) and the state fields the glue resolves."""

from __future__ import annotations

from typing import Any

from proxy.doors.responses_codec._checks import (
    array,
    at,
    boolean,
    choice,
    invalid_type,
    invalid_value,
    metadata,
    missing,
    number,
    obj,
    string,
    unsupported,
)
from proxy.doors.responses_codec._input import parse_input
from proxy.errors import BadRequest
from proxy.types import JSONObject, Message, frozen

_REQUEST_KEYS = frozenset(
    {
        "background", "context_management", "conversation", "include", "input", "instructions",
        "max_output_tokens", "max_tool_calls", "metadata", "model", "moderation", "parallel_tool_calls",
        "previous_response_id", "prompt", "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention",
        "reasoning", "safety_identifier", "service_tier", "store", "stream", "stream_options", "temperature",
        "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user",
    }
)  # fmt: skip
_FUNCTION_TOOL_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
_INCLUDABLE = (
    "file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
    "message.input_image.image_url", "computer_call_output.output.image_url", "code_interpreter_call.outputs",
    "reasoning.encrypted_content", "message.output_text.logprobs",
)  # fmt: skip
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_SUMMARIES = ("auto", "concise", "detailed")
_SERVICE_TIERS = ("auto", "default", "flex", "scale", "priority", "fast", "ultrafast")
_PASSED = ("user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier")
"""Request fields the chat core takes under the same name."""
_PASSED_CHOICES = {"prompt_cache_retention": ("in_memory", "24h"), "service_tier": _SERVICE_TIERS}
"""The values allowed for the fields of `_PASSED` that are enumerations."""


@frozen
class ResponsesCall:
    """A `POST /v1/responses` request, validated: the core request and what the glue resolves."""

    chat_body: JSONObject
    """The core request: a Chat Completions body; `messages` = instructions (as system) + input."""
    model: str
    stream: bool
    store: bool
    previous_response_id: str | None
    conversation: str | None
    truncation: str
    instructions: str | None
    compactions: tuple[tuple[int, str], ...]
    """(position in `chat_body["messages"]`, encrypted_content) of each compaction item, in order."""
    echo: JSONObject
    """The request's fields as a Response object repeats them."""

    @property
    def prompt_cache_key(self) -> str | None:
        key = self.chat_body.get("prompt_cache_key")
        return key if isinstance(key, str) else None


def _function_tools(value: object) -> tuple[list[JSONObject], list[JSONObject]]:
    """`tools` -> (chat tools, the tools as a Response repeats them); only function tools pass."""
    chat: list[JSONObject] = []
    echo: list[JSONObject] = []
    for index, tool in enumerate(array(value, "tools")):
        path = at("tools", index)
        if not isinstance(tool, dict):
            raise invalid_type(path, "an object", tool)
        kind = string(tool, "type", path, required=True)
        if kind != "function":
            raise unsupported(path, f"the {kind!r} tool: the proxy serves function tools only")
        obj(tool, path, _FUNCTION_TOOL_KEYS)
        name = string(tool, "name", path, required=True)
        if any(t["name"] == name for t in echo):
            raise BadRequest(f"Duplicate function name {name!r} in 'tools'.", param=at(path, "name"))
        parameters = tool.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise invalid_type(at(path, "parameters"), "an object", parameters)
        shown = {
            "type": "function",
            "name": name,
            "description": string(tool, "description", path),
            "parameters": parameters,
            "strict": boolean(tool, "strict", path),
        }
        echo.append(shown)
        function = {k: shown[k] for k in ("name", "description", "parameters", "strict") if shown[k] is not None}
        chat.append({"type": "function", "function": function})
    return chat, echo


def _tool_choice(value: object, names: set[str]) -> Any:
    """`tool_choice` -> chat's; a named function must be among `tools`."""
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise invalid_value("tool_choice", value, ("auto", "none", "required"))
        return value
    if not isinstance(value, dict):
        raise invalid_type("tool_choice", "a string or an object", value)
    kind = string(value, "type", "tool_choice", required=True)
    if kind == "function":
        obj(value, "tool_choice", frozenset({"type", "name"}))
        return {"type": "function", "function": {"name": _known_function(value, "tool_choice", names)}}
    if kind == "allowed_tools":
        obj(value, "tool_choice", frozenset({"type", "mode", "tools"}))
        mode = choice(value, "mode", "tool_choice", ("auto", "required"))
        if mode is None:
            raise missing("tool_choice.mode")
        if "tools" not in value:
            raise missing("tool_choice.tools")
        allowed = []
        for index, tool in enumerate(array(value["tools"], "tool_choice.tools")):
            path = at("tool_choice.tools", index)
            obj(tool, path, frozenset({"type", "name"}))
            choice(tool, "type", path, ("function",))
            allowed.append({"type": "function", "function": {"name": _known_function(tool, path, names)}})
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": allowed}}
    raise unsupported("tool_choice.type", f"{kind!r}: the proxy serves function tools only")


def _known_function(value: JSONObject, path: str, names: set[str]) -> str:
    name = str(string(value, "name", path, required=True))
    if name not in names:
        raise BadRequest(f"Tool choice '{name}' not found in 'tools' parameter.", param=at(path, "name"))
    return name


def _text(value: object) -> tuple[JSONObject, JSONObject]:
    """`text` -> (chat fields: response_format, verbosity; the text config a Response repeats)."""
    text = obj(value, "text", frozenset({"format", "verbosity"}))
    chat: JSONObject = {}
    shown: JSONObject = {"format": {"type": "text"}}
    verbosity = choice(text, "verbosity", "text", ("low", "medium", "high"))
    if verbosity is not None:
        chat["verbosity"] = shown["verbosity"] = verbosity
    fmt = text.get("format")
    if fmt is None:
        return chat, shown
    if not isinstance(fmt, dict):
        raise invalid_type("text.format", "an object", fmt)
    kind = choice(fmt, "type", "text.format", ("text", "json_object", "json_schema"))
    if kind in ("text", "json_object"):
        obj(fmt, "text.format", frozenset({"type"}))
        chat["response_format"] = shown["format"] = {"type": kind}
    elif kind == "json_schema":
        obj(fmt, "text.format", frozenset({"type", "name", "schema", "description", "strict"}))
        schema = fmt.get("schema")
        if schema is None:
            raise missing("text.format.schema")
        if not isinstance(schema, dict):
            raise invalid_type("text.format.schema", "an object", schema)
        spec = {
            "name": string(fmt, "name", "text.format", required=True),
            "schema": schema,
            "description": string(fmt, "description", "text.format"),
            "strict": boolean(fmt, "strict", "text.format"),
        }
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {k: v for k, v in spec.items() if v is not None},
        }
        shown["format"] = {"type": "json_schema", **spec}
    else:
        raise missing("text.format.type")
    return chat, shown


def _reasoning(value: object) -> JSONObject:
    reasoning = obj(value, "reasoning", frozenset({"effort", "summary", "generate_summary", "mode", "context"}))
    string(reasoning, "mode", "reasoning")
    choice(reasoning, "context", "reasoning", ("auto", "current_turn", "all_turns"))
    summary = choice(reasoning, "summary", "reasoning", _SUMMARIES)
    generated = choice(reasoning, "generate_summary", "reasoning", _SUMMARIES)
    return {"effort": choice(reasoning, "effort", "reasoning", _EFFORTS), "summary": summary or generated}


def _conversation(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, dict):
        raise invalid_type("conversation", "a string or an object", value)
    return string(obj(value, "conversation", frozenset({"id"})), "id", "conversation", required=True)


def check_cache_options(body: JSONObject) -> None:
    """`prompt_cache_options`, checked and not acted on (the upstream caches as it does)."""
    if body.get("prompt_cache_options") is not None:
        options = obj(body["prompt_cache_options"], "prompt_cache_options", frozenset({"ttl", "mode"}))
        choice(options, "ttl", "prompt_cache_options", ("30m",))
        choice(options, "mode", "prompt_cache_options", ("implicit", "explicit"))


def passed_fields(body: JSONObject) -> JSONObject:
    """The fields the chat core takes under the same name (`_PASSED`), checked."""
    passed: JSONObject = {}
    for key in _PASSED:
        allowed = _PASSED_CHOICES.get(key)
        if (value := choice(body, key, "", allowed) if allowed else string(body, key, "")) is not None:
            passed[key] = value
    return passed


def _ignored(body: JSONObject) -> None:
    """Fields accepted, checked and not acted on: the proxy has nothing they would change."""
    for index, entry in enumerate(array(body.get("include") or [], "include")):
        if entry not in _INCLUDABLE:
            raise invalid_value(at("include", index), entry, _INCLUDABLE)
    if body.get("stream_options") is not None:
        boolean(obj(body["stream_options"], "stream_options", frozenset({"include_obfuscation"})),
                 "include_obfuscation", "stream_options")  # fmt: skip
    check_cache_options(body)
    for index, entry in enumerate(array(body.get("context_management") or [], "context_management")):
        path = at("context_management", index)
        choice(obj(entry, path, frozenset({"type", "compact_threshold"})), "type", path, ("compaction",))
        if entry.get("compact_threshold") is not None and (
            isinstance(entry["compact_threshold"], bool) or not isinstance(entry["compact_threshold"], int)
        ):
            raise invalid_type(at(path, "compact_threshold"), "an integer", entry["compact_threshold"])


def parse_request(body: object) -> ResponsesCall:
    """Validate a `POST /v1/responses` body and translate it; every refusal is a BadRequest naming its field.

    Refused: `background: true`, `prompt` (OpenAI-stored prompts), `moderation`, built-in and custom
    tools, `item_reference` and unknown fields. Checked but not acted on: `include`, `stream_options`,
    `prompt_cache_options`, `context_management` (the proxy manages the context itself), `top_logprobs`
    and `max_tool_calls` (repeated in the Response only)."""
    fields = obj(body, "", _REQUEST_KEYS)
    model = string(fields, "model", "", required=True)
    if not model:
        raise BadRequest("Invalid 'model': empty string.", param="model", code="invalid_value")
    if boolean(fields, "background"):
        raise unsupported("background", "responses are answered while the request waits")
    for key, why in (("prompt", "prompt templates are stored at OpenAI"), ("moderation", "no moderation model")):
        if fields.get(key) is not None:
            raise unsupported(key, why)
    previous = string(fields, "previous_response_id", "")
    conversation = _conversation(fields.get("conversation"))
    if previous is not None and conversation is not None:
        raise BadRequest(
            "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or "
            "'conversation'.",
            param="conversation",
            code="mutually_exclusive_parameters",
        )
    _ignored(fields)
    instructions = string(fields, "instructions", "")
    messages: list[Message] = [{"role": "system", "content": instructions}] if instructions is not None else []
    messages, compactions = parse_input(fields.get("input"), messages)

    chat: JSONObject = {"model": model, "messages": messages}
    chat_tools, tools = _function_tools(fields["tools"]) if fields.get("tools") is not None else ([], [])
    if chat_tools:
        chat["tools"] = chat_tools
    tool_choice = fields.get("tool_choice")
    if tool_choice is not None:
        chat["tool_choice"] = _tool_choice(tool_choice, {t["name"] for t in tools})
    parallel = boolean(fields, "parallel_tool_calls")
    if parallel is not None and chat_tools:
        chat["parallel_tool_calls"] = parallel
    max_output = number(fields, "max_output_tokens", 16, float("inf"), integer=True)
    if max_output is not None:
        chat["max_completion_tokens"] = max_output
    for key, high in (("temperature", 2), ("top_p", 1)):
        if (value := number(fields, key, 0, high, integer=False)) is not None:
            chat[key] = value
    text_chat, text = _text(fields["text"]) if fields.get("text") is not None else ({}, {"format": {"type": "text"}})
    chat.update(text_chat)
    reasoning = (
        _reasoning(fields["reasoning"]) if fields.get("reasoning") is not None else {"effort": None, "summary": None}
    )
    if reasoning["effort"] is not None:
        chat["reasoning_effort"] = reasoning["effort"]
    chat.update(passed_fields(fields))
    stream = bool(boolean(fields, "stream"))
    chat["stream"] = stream
    store = boolean(fields, "store") is not False
    truncation = choice(fields, "truncation", "", ("auto", "disabled")) or "auto"
    echo: JSONObject = {
        "instructions": instructions,
        "tools": tools,
        "tool_choice": tool_choice if tool_choice is not None else "auto",
        "parallel_tool_calls": parallel is not False,
        "temperature": chat.get("temperature"),
        "top_p": chat.get("top_p"),
        "max_output_tokens": max_output,
        "max_tool_calls": number(fields, "max_tool_calls", 0, float("inf"), integer=True),
        "top_logprobs": number(fields, "top_logprobs", 0, 20, integer=True),
        "metadata": metadata(fields.get("metadata")) or {},
        "text": text,
        "reasoning": reasoning,
        "truncation": truncation,
        "store": store,
        "background": False,
        "previous_response_id": previous,
        "conversation": {"id": conversation} if conversation is not None else None,
        **{key: chat.get(key) for key in _PASSED},
    }
    return ResponsesCall(
        chat_body=chat,
        model=str(model),
        stream=stream,
        store=store,
        previous_response_id=previous,
        conversation=conversation,
        truncation=truncation,
        instructions=instructions,
        compactions=tuple(compactions),
        echo=echo,
    )
