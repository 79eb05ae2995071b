"""The proxy's tool rounds read from canned upstream answers: what the client's stream and
body carry, what the next round is sent, what the journal keeps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from multidict import CIMultiDict

from proxy.context_tools.rounds import ToolRounds
from proxy.context_tools.tools import RECALL, ProxyTools


class Canned:
    """An upstream answer with a fixed body."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.status = 200
        self.headers = CIMultiDict({"Content-Type": content_type})
        self.body = body
        self.seconds = 0.0

    def relay_headers(self) -> CIMultiDict[str]:
        return CIMultiDict(self.headers)

    async def read(self) -> bytes:
        return self.body

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), 7):  # events split across reads
            yield self.body[start : start + 7]

    def close(self) -> None:
        pass


class Resolver:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def answer(self, call: dict[str, Any]) -> str:
        self.calls.append(call)
        return "the span"


def call(name: str, id_: str) -> dict[str, Any]:
    return {
        "id": id_,
        "type": "function",
        "function": {"name": name, "arguments": '{"uri": "context://archive/win_1"}'},
    }


def stream(id_: str, content: str, calls: list[dict[str, Any]], usage: int) -> Canned:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"id": id_, "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if content:
        chunks.append(chunk({"content": content}))
    for index, c in enumerate(calls):
        head = {"index": index, "id": c["id"], "type": "function", "function": {"name": c["function"]["name"]}}
        chunks.append(chunk({"tool_calls": [head]}))
        chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": c["function"]["arguments"]}}]}))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    usage_chunk = {"id": id_, "choices": [], "usage": {"prompt_tokens": usage, "completion_tokens": 1}}
    events = [b"data: " + orjson.dumps(c) + b"\n\n" for c in [*chunks, usage_chunk]]
    return Canned(b"".join(events) + b"data: [DONE]\n\n", "text/event-stream")


def completion(content: str | None, calls: list[dict[str, Any]], usage: int) -> Canned:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    body = {"id": "x", "choices": [choice], "usage": {"prompt_tokens": usage, "completion_tokens": 1}}
    return Canned(orjson.dumps(body), "application/json")


def rounds(first: Canned, *later: Canned, max_rounds: int = 3) -> tuple[ToolRounds, list[tuple[Any, bool]], Resolver]:
    sent: list[tuple[Any, bool]] = []
    queue = list(later)

    async def send(added: list[dict[str, Any]], offering: bool) -> Canned:
        sent.append((added, offering))
        return queue.pop(0)

    resolver = Resolver()
    tools = ProxyTools((RECALL,), (), max_rounds)
    told: list[Any] = []
    answer = ToolRounds(first, send=send, tools=tools, resolver=resolver, on_round=lambda *a: told.append(a))  # type: ignore[arg-type]
    return answer, sent, resolver


async def events_of(answer: ToolRounds) -> list[Any]:
    raw = b"".join([chunk async for chunk in answer.iter_chunks()])
    return [e[6:] if e == b"data: [DONE]" else orjson.loads(e[6:]) for e in raw.split(b"\n\n") if e]


async def test_a_streamed_proxy_round_is_replaced_by_the_next() -> None:
    answer, sent, resolver = rounds(
        stream("first", "Let me check. ", [call(RECALL, "r1")], 100), stream("second", "It is 42.", [], 150)
    )
    events = await events_of(answer)
    assert events[-1] == b"[DONE]"
    chunks = events[:-1]
    assert {c["id"] for c in chunks} == {"first"}
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == "Let me check. It is 42."
    assert [d["role"] for d in deltas if "role" in d] == ["assistant"]
    assert not any("tool_calls" in d for d in deltas)
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]] == [
        "stop"
    ]
    assert chunks[-1]["usage"] == {"prompt_tokens": 250, "completion_tokens": 2}
    ((added, offering),) = sent
    assert offering, "rounds left: the next request offers the tools again"
    assert added[0]["tool_calls"] == [call(RECALL, "r1")] and added[1] == {
        "role": "tool", "tool_call_id": "r1", "content": "the span"
    }  # fmt: skip
    assert [c["id"] for c in resolver.calls] == ["r1"]
    assert len(answer.rounds) == 1 and answer.first_usage == {"prompt_tokens": 100, "completion_tokens": 1}


async def test_a_streamed_mixed_answer_ends_with_the_clients_calls_whole() -> None:
    answer, sent, _ = rounds(stream("only", "", [call("lookup", "c1"), call(RECALL, "r1")], 10))
    chunks = (await events_of(answer))[:-1]
    calls = [t for c in chunks if c["choices"] for t in c["choices"][0]["delta"].get("tool_calls") or ()]
    assert calls == [{"index": 0, **call("lookup", "c1")}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls" and sent == []


async def test_json_rounds_join_content_and_sum_usage() -> None:
    answer, sent, _ = rounds(
        completion("Checking.", [call(RECALL, "r1")], 100),
        completion(None, [call(RECALL, "r2")], 120),
        completion(" Done.", [call(RECALL, "r3")], 140),
        max_rounds=2,
    )
    body = orjson.loads(await answer.read())
    message = body["choices"][0]["message"]
    assert message["content"] == "Checking. Done." and "tool_calls" not in message
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 360, "completion_tokens": 3}
    assert [offering for _, offering in sent] == [True, False], "the request after the last round offers no tools"
    assert len(answer.rounds) == 2 and "annotations" not in answer.rounds[0]["message"]
