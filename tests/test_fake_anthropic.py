"""The fake Anthropic upstream, checked with the official `anthropic` SDK: what it answers, how it
streams, and that it refuses what Anthropic refuses."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import anthropic
import httpx2
import orjson
import pytest
from aiohttp.test_utils import TestServer

from proxy.dialects.anthropic import (
    ANTHROPIC_VERSION,
    MESSAGES_PATH,
    ChunkTranslator,
    completion_from_message,
    to_messages_body,
)
from proxy.upstream.sse import StreamAssembler
from tests.conftest import SHUTDOWN_TIMEOUT_S
from tests.fake_anthropic import FakeAnthropic, signature_of

MODEL = "claude-sonnet-4-5"
CACHE = {"type": "ephemeral"}


class Running:
    def __init__(self, fake: FakeAnthropic, url: str) -> None:
        self.fake, self.url = fake, url

    def client(self, **kwargs: Any) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=self.url, api_key="sk-ant-test", max_retries=0, **kwargs)


@pytest.fixture
async def upstream(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> Running:
    fake = FakeAnthropic()
    server = await aiohttp_server(fake.app(), shutdown_timeout=SHUTDOWN_TIMEOUT_S)
    return Running(fake, str(server.make_url("")).rstrip("/"))


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def test_a_plain_answer_with_usage_and_the_mark(upstream: Running) -> None:
    raw = await upstream.client().messages.with_raw_response.create(
        model=MODEL, max_tokens=200, system="Be brief.", messages=user("hello there")
    )
    message = await raw.parse()
    assert raw.headers["X-Fake-Upstream"] == "1"
    assert message.role == "assistant" and message.stop_reason == "end_turn" and message.model == MODEL
    assert message.content[0].type == "text" and "you said: hello there" in message.content[0].text
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.cache_read_input_tokens == 0 and message.usage.cache_creation_input_tokens == 0
    assert upstream.fake.received[0]["system"] == "Be brief."
    headers = {name.lower(): value for name, value in upstream.fake.headers[0].items()}
    assert headers["authorization"] == "Bearer sk-ant-test" and headers["anthropic-version"]


async def test_the_sync_client_gets_the_same_answer(upstream: Running) -> None:
    client = anthropic.Anthropic(base_url=upstream.url, api_key="sk-ant-test", max_retries=0)
    message = await asyncio.to_thread(client.messages.create, model=MODEL, max_tokens=100, messages=user("sync"))
    assert "you said: sync" in message.content[0].text  # type: ignore[union-attr]


async def test_a_stream_carries_the_answer_and_its_usage(upstream: Running) -> None:
    async with upstream.client().messages.stream(
        model=MODEL, max_tokens=300, messages=user("tell me a story about streams")
    ) as stream:
        pieces = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert len(pieces) > 2 and "".join(pieces) == final.content[0].text  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 1 and final.usage.input_tokens > 0


async def test_thinking_streams_with_its_signature_and_is_accepted_back(upstream: Running) -> None:
    client = upstream.client()
    async with client.messages.stream(model=MODEL, max_tokens=300, messages=user("think first")) as stream:
        events = [event.type async for event in stream]
        final = await stream.get_final_message()
    thinking, text = final.content
    assert thinking.type == "thinking" and thinking.signature == signature_of(thinking.thinking)
    assert text.type == "text" and "signature" in events and "thinking" in events
    history = [*user("think first"), {"role": "assistant", "content": [b.model_dump() for b in final.content]}]
    again = await client.messages.create(model=MODEL, max_tokens=100, messages=[*history, *user("and now?")])
    assert again.stop_reason == "end_turn"
    history[1]["content"][0]["thinking"] += " (edited)"
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
        await client.messages.create(model=MODEL, max_tokens=100, messages=[*history, *user("and now?")])


async def test_enabled_thinking_answers_with_a_thinking_block(upstream: Running) -> None:
    message = await upstream.client().messages.create(
        model=MODEL, max_tokens=3000, thinking={"type": "enabled", "budget_tokens": 2048}, messages=user("hi")
    )
    assert [block.type for block in message.content] == ["thinking", "text"]


async def test_a_tool_round_trip(upstream: Running) -> None:
    client = upstream.client()
    tools = [{"name": "weather", "description": "Weather now", "input_schema": {"type": "object", "properties": {}}}]
    asked = await client.messages.create(model=MODEL, max_tokens=200, tools=tools, messages=user("call tool weather"))
    (call,) = asked.content
    assert asked.stop_reason == "tool_use" and call.type == "tool_use" and call.name == "weather"
    assert call.input == {"q": 1, "scope": "all"}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18C in Paris"}]}
    history = [*user("call tool weather"), {"role": "assistant", "content": [call.model_dump()]}, result]
    async with client.messages.stream(model=MODEL, max_tokens=200, tools=tools, messages=history) as stream:
        answered = await stream.get_final_message()
    assert answered.content[0].text == "Tool said: 18C in Paris"  # type: ignore[union-attr]


async def test_a_streamed_tool_call_arrives_whole(upstream: Running) -> None:
    tools = [{"name": "lookup", "input_schema": {"type": "object", "properties": {}}}]
    async with upstream.client().messages.stream(
        model=MODEL, max_tokens=200, tools=tools, messages=user("call tool lookup")
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use" and final.content[0].input == {"q": 1, "scope": "all"}  # type: ignore[union-attr]


def _tool_use(call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "f", "input": {}}]}


def _tool_result(call_id: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}]}


def _cached(n: int) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": f"part {i}", "cache_control": CACHE} for i in range(n)],
    }


REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown field", {"messages": user("hi"), "extra_body": {"n": 2}}, "n: Extra inputs are not permitted"),
    ("not alternating", {"messages": [*user("a"), *user("b")]}, "roles must alternate"),
    ("assistant first", {"messages": [{"role": "assistant", "content": "hi"}, *user("b")]}, "first message must use"),
    ("result without use", {"messages": [*user("a"), {"role": "assistant", "content": "x"}, _tool_result("t1")]},
     "unexpected `tool_use_id`"),
    ("use without result", {"messages": [*user("a"), _tool_use("t1"), *user("b")]}, "without `tool_result` blocks"),
    ("result after text", {"messages": [*user("a"), _tool_use("t1"), {"role": "user", "content": [
        {"type": "text", "text": "first"}, {"type": "tool_result", "tool_use_id": "t1"}]}]}, "must come first"),
    ("unknown block", {"messages": [{"role": "user", "content": [{"type": "audio", "data": "x"}]}]}, "Input tag 'audio'"),
    ("empty text", {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]}, "must be non-empty"),
    ("five breakpoints", {"messages": [_cached(5)]}, "A maximum of 4 blocks with cache_control"),
    ("unsigned thinking", {"messages": [*user("a"), {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "x"}]}, *user("b")]}, "signature: Field required"),
    ("small budget", {"messages": user("a"), "thinking": {"type": "enabled", "budget_tokens": 500}}, "greater than or equal to 1024"),
    ("budget over max", {"messages": user("a"), "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 2000}},
     "must be greater than `thinking.budget_tokens`"),
    ("thinking on an unthought tool round", {"messages": [*user("a"), _tool_use("t1"), _tool_result("t1")], "max_tokens": 3000,
     "thinking": {"type": "enabled", "budget_tokens": 2048}}, "must start with a thinking block"),
    ("too long", {"model": "claude-tiny", "messages": user("word " * 3100)}, r"prompt is too long: \d+ tokens > 3000 maximum"),
    ("context management without beta", {"messages": user("a"), "extra_body": {"context_management": {"edits": [
        {"type": "clear_tool_uses_20250919"}]}}}, "context-management-2025-06-27"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "params", "message"), REFUSALS, ids=[case for case, _, _ in REFUSALS])
async def test_it_refuses_what_anthropic_refuses(
    upstream: Running, case: str, params: dict[str, Any], message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=message) as refused:
        await upstream.client().messages.create(**{"model": MODEL, "max_tokens": 100, **params})
    assert refused.value.status_code == 400
    assert refused.value.body["type"] == "error" and refused.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


async def test_max_tokens_is_required(upstream: Running) -> None:
    with pytest.raises(anthropic.BadRequestError, match="max_tokens: Field required"):
        await upstream.client().post("/v1/messages", body={"model": MODEL, "messages": user("hi")}, cast_to=object)


async def test_the_key_and_the_version_header_are_required(upstream: Running) -> None:
    async with aiohttp.ClientSession() as session:
        body = {"model": MODEL, "max_tokens": 10, "messages": user("hi")}
        async with session.post(
            upstream.url + "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}
        ) as r:
            assert r.status == 401 and (await r.json())["error"]["type"] == "authentication_error"
        async with session.post(upstream.url + "/v1/messages", json=body, headers={"x-api-key": "k"}) as r:
            assert r.status == 400 and "anthropic-version" in (await r.json())["error"]["message"]


async def test_context_management_with_its_beta_header_is_recorded(upstream: Running) -> None:
    edits = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}}]}
    message = await upstream.client().beta.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=user("hi"),
        betas=["context-management-2025-06-27"],
        context_management=edits,
    )
    assert message.context_management is not None and upstream.fake.context_management == [edits]
    with pytest.raises(anthropic.BadRequestError, match="compact-2026-01-12"):
        await upstream.client().beta.messages.create(
            model=MODEL, max_tokens=100, messages=user("hi"), betas=["context-management-2025-06-27"],
            context_management={"edits": [{"type": "compact_20260112"}]},
        )  # fmt: skip


@pytest.mark.parametrize(
    ("steer", "error"),
    [("fail 429", anthropic.RateLimitError), ("fail 500", anthropic.InternalServerError),
     ("fail 529", anthropic.OverloadedError)],
)  # fmt: skip
async def test_steered_failures(upstream: Running, steer: str, error: type[anthropic.APIStatusError]) -> None:
    with pytest.raises(error) as failed:
        await upstream.client().messages.create(model=MODEL, max_tokens=100, messages=user(steer))
    assert failed.value.response.headers["X-Fake-Upstream"] == "1"


async def test_a_failing_model(upstream: Running) -> None:
    upstream.fake.failing[MODEL] = 529
    with pytest.raises(anthropic.OverloadedError):
        await upstream.client().messages.create(model=MODEL, max_tokens=100, messages=user("hi"))


async def test_a_cut_stream_makes_the_sdk_raise(upstream: Running) -> None:
    # the SDK raises the transport's error as it is, or (from anthropic 2.17) wrapped as its own
    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError), match="incomplete chunked read"):
        async with upstream.client().messages.stream(
            model=MODEL, max_tokens=100, messages=user("cut after 4")
        ) as stream:
            async for _ in stream:
                pass


async def test_a_cut_json_body_makes_the_sdk_raise(upstream: Running) -> None:
    with pytest.raises(anthropic.APIConnectionError):
        await upstream.client().messages.create(model=MODEL, max_tokens=100, messages=user("cut after 1"))


async def test_a_stalled_stream_times_out(upstream: Running) -> None:
    client = upstream.client(timeout=0.5)
    with pytest.raises((httpx2.ReadTimeout, anthropic.APITimeoutError)):
        async with client.messages.stream(model=MODEL, max_tokens=100, messages=user("stall after 3")) as stream:
            async for _ in stream:
                pass


async def test_prompt_caching_reads_what_an_earlier_request_wrote(upstream: Running) -> None:
    client = upstream.client()
    system = [{"type": "text", "text": "Rules. " * 300, "cache_control": CACHE}]
    first = await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=user("one"))
    second = await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=user("two"))
    written = first.usage.cache_creation_input_tokens
    assert written and written > 300 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == written and second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens == first.usage.input_tokens
    other = await client.messages.create(model="claude-haiku-4-5", max_tokens=100, system=system, messages=user("one"))
    assert other.usage.cache_read_input_tokens == 0


async def test_count_tokens_counts_the_prompt_a_message_is_billed_for(upstream: Running) -> None:
    client = upstream.client()
    messages = user("count these words please")
    counted = await client.messages.count_tokens(model=MODEL, system="Be brief.", messages=messages)
    answered = await client.messages.create(model=MODEL, max_tokens=100, system="Be brief.", messages=messages)
    assert counted.input_tokens == answered.usage.input_tokens and upstream.fake.counted[0]["messages"] == messages


async def test_stop_sequences_and_max_tokens_end_the_answer(upstream: Running) -> None:
    client = upstream.client()
    stopped = await client.messages.create(model=MODEL, max_tokens=100, stop_sequences=["messages"], messages=user("x"))
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "messages"
    assert stopped.content[0].text == "Answer 1: I read 1 "  # type: ignore[union-attr]
    short = await client.messages.create(model=MODEL, max_tokens=3, messages=user("x"))
    text = short.content[0].text  # type: ignore[union-attr]
    assert short.stop_reason == "max_tokens" and 0 < len(text) < 10 and "Answer 1: I read".startswith(text)


async def test_the_dialects_requests_are_accepted_and_its_translations_round_trip(upstream: Running) -> None:
    """The core conversation through `proxy.dialects.anthropic`: thinking, a tool call and its result,
    cache_control and a stream, as an Anthropic upstream would see them."""
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}]
    system = {"role": "system", "content": [{"type": "text", "text": "Rules. " * 300, "cache_control": CACHE}]}
    history: list[dict[str, Any]] = [system, {"role": "user", "content": "think, then call tool weather"}]
    headers = {"x-api-key": "sk-ant-test", "anthropic-version": ANTHROPIC_VERSION}
    async with aiohttp.ClientSession(headers=headers) as session:
        body = to_messages_body({"model": MODEL, "messages": history, "tools": tools}, default_max_tokens=500)
        async with session.post(upstream.url + MESSAGES_PATH, json=body) as answer:
            completion = completion_from_message(await answer.json())
        assistant = completion["choices"][0]["message"]
        assert completion["choices"][0]["finish_reason"] == "tool_calls" and assistant["thinking_blocks"]
        call_id = assistant["tool_calls"][0]["id"]
        history += [assistant, {"role": "tool", "tool_call_id": call_id, "content": "18C"}]
        body = to_messages_body(
            {"model": MODEL, "messages": history, "tools": tools, "stream": True}, default_max_tokens=500
        )
        translator, assembler = ChunkTranslator(), StreamAssembler()
        async with session.post(upstream.url + MESSAGES_PATH, json=body) as answer:
            for raw in (await answer.read()).split(b"\n\n"):
                lines = dict(line.split(b": ", 1) for line in raw.split(b"\n") if b": " in line)
                if lines:
                    for chunk in translator.feed(lines[b"event"].decode(), orjson.loads(lines[b"data"])):
                        assembler.add(chunk)
    assert assembler.message()["content"] == "Tool said: 18C" and assembler.finish_reason == "stop"
    assert assembler.usage is not None and assembler.usage["prompt_tokens_details"]["cached_tokens"] > 300
    assert completion["usage"]["cache_creation_input_tokens"] == assembler.usage["cache_read_input_tokens"]
