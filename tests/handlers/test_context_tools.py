"""The context tools the proxy serves itself, end to end against the fake's tiny model.

recall_context brings an evicted fact back; the client never sees the proxy's tools;
a URI of another tenant's session is not found; max_rounds stops a looping model;
new_context forces the next compaction; the handoff notice goes out once per window.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import openai
import pytest

from tests.conftest import Proxy, ProxyFactory
from tests.handlers.test_overflow import SYSTEM, filler
from tests.handlers.test_sessions import session_json

FACT = "Remember this: the secret code is PELICAN-42."
QUESTION = "What was the secret code?"
LOOKUP = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}


def user_texts(messages: list[dict[str, Any]]) -> str:
    """The user messages' text (the fake's answers echo the last user message)."""
    return str([m["content"] for m in messages if m["role"] == "user"])


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or ()]


async def ask(client: openai.AsyncOpenAI, content: str, *, stream: bool, **extra: Any) -> tuple[str, list[Any], Any]:
    """One delta turn, streamed or not: (content, the tool calls the client saw, usage)."""
    messages = [{"role": "user", "content": content}]
    if not stream:
        answer = await client.chat.completions.create(model="tiny-model", messages=messages, **extra)
        message = answer.choices[0].message
        return message.content or "", list(message.tool_calls or ()), answer.usage
    chunks = [
        chunk
        async for chunk in await client.chat.completions.create(
            model="tiny-model", messages=messages, stream=True, stream_options={"include_usage": True}, **extra
        )
    ]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    calls = [call for d in deltas for call in d.tool_calls or ()]
    assert len({c.id for c in chunks}) == 1, "one chunk id throughout, whatever the rounds"
    return "".join(d.content or "" for d in deltas), calls, chunks[-1].usage


async def compact_after_fact(proxy: Proxy, session: str, *, key: str = "sk-test", windows: int = 1) -> Any:
    """A delta conversation that states FACT first, then runs until `windows` compactions landed."""
    client = proxy.client(key, default_headers={"X-Session-Id": session})
    raw = await client.chat.completions.with_raw_response.create(
        model="tiny-model", messages=[SYSTEM, {"role": "user", "content": FACT}]
    )
    for n in range(60):
        raw = await client.chat.completions.with_raw_response.create(
            model="tiny-model", messages=[{"role": "user", "content": filler(n)}]
        )
        if raw.headers["X-Context-Window-Id"] == f"win_{windows}":
            return client
    raise AssertionError("the conversation never compacted")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_recall_brings_an_evicted_fact_back_and_the_client_never_sees_the_tool(
    start_proxy: ProxyFactory, stream: bool
) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = await compact_after_fact(proxy, "recall")
    assert "recall_context" in tool_names(proxy.fake.chats[-1]), "offered once the session has an archive"
    before = len(proxy.fake.chats)
    content, calls, usage = await ask(client, QUESTION, stream=stream)
    assert "PELICAN-42" in content and calls == []
    asked, answered = proxy.fake.chats[before:]
    assert "PELICAN-42" not in str(asked["messages"]), "the fact had left the context"
    call, result = answered["messages"][-2:]
    assert call["tool_calls"][0]["function"]["name"] == "recall_context"
    assert "context://archive/win_1" in call["tool_calls"][0]["function"]["arguments"]
    assert result["role"] == "tool" and FACT in result["content"]
    upstream = [proxy.fake.prompt_tokens(b["messages"], b.get("tools")) for b in (asked, answered)]
    assert usage.prompt_tokens == sum(upstream), "the client pays for both rounds"
    _, journal = await session_json(proxy, "recall")
    turn = journal["turns"][-1]
    assert "PELICAN-42" in turn["output"]["content"] and "tool_calls" not in turn["output"]
    assert [r["message"]["tool_calls"][0]["function"]["name"] for r in turn["rounds"]] == ["recall_context"]
    assert FACT in turn["rounds"][0]["results"][0]["content"]
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/metrics") as r:
        assert 'context_proxy_tool_calls_total{tool="recall_context"} 1' in await r.text()
    await ask(client, "thanks", stream=stream)
    later = proxy.fake.chats[-1]["messages"]
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in later), "rounds are not replayed"
    assert "PELICAN-42" in str(later), "the answer itself stays in the history"


async def test_a_uri_of_another_tenant_is_not_found(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await compact_after_fact(proxy, "shared", key="sk-a", windows=2)
    other = await compact_after_fact(proxy, "shared", key="sk-b", windows=1)
    before = len(proxy.fake.chats)
    content, _, _ = await ask(other, "What was the secret code in context://archive/win_2?", stream=False)
    result = proxy.fake.chats[before + 1]["messages"][-1]
    assert result == {"role": "tool", "tool_call_id": result["tool_call_id"], "content": "[not found]"}
    assert "PELICAN" not in content
    content, _, _ = await ask(other, "What was the secret code in context://archive/win_1?", stream=False)
    assert FACT in proxy.fake.chats[-1]["messages"][-1]["content"] and "PELICAN-42" in content, "its own is found"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_max_rounds_stops_a_model_that_loops(start_proxy: ProxyFactory, stream: bool) -> None:
    proxy = await start_proxy(strategy="summarize", tools={"max_rounds": 2})
    client = await compact_after_fact(proxy, "loop")
    before = len(proxy.fake.chats)
    content, calls, usage = await ask(client, "keep recalling: what was the secret code?", stream=stream)
    sent = proxy.fake.chats[before:]
    assert [tool_names(b) for b in sent] == [["recall_context"], ["recall_context"], []]
    assert "PELICAN-42" in content and calls == []
    assert usage.prompt_tokens == sum(proxy.fake.prompt_tokens(b["messages"], b.get("tools")) for b in sent)
    _, journal = await session_json(proxy, "loop")
    assert len(journal["turns"][-1]["rounds"]) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_proxy_call_beside_a_client_call_returns_only_the_client_call(
    start_proxy: ProxyFactory, stream: bool
) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = await compact_after_fact(proxy, "mixed")
    before = len(proxy.fake.chats)
    _, calls, _ = await ask(client, QUESTION + " call tool lookup", stream=stream, tools=[LOOKUP])
    assert [c.function.name for c in calls] == ["lookup"]
    assert len(proxy.fake.chats) == before + 1, "no further round: the client's call needs the client"
    answer = [{"role": "tool", "tool_call_id": calls[0].id, "content": "looked up"}]
    await client.chat.completions.create(model="tiny-model", messages=answer, tools=[LOOKUP])  # type: ignore[arg-type]
    sent = proxy.fake.chats[-1]["messages"]
    assert [c["function"]["name"] for c in sent[-2]["tool_calls"]] == ["lookup"], "no dangling proxy call"
    _, journal = await session_json(proxy, "mixed")
    rounds = journal["turns"][-2]["rounds"]
    assert rounds[0]["message"]["tool_calls"][0]["function"]["name"] == "recall_context"


async def test_a_client_tool_of_the_same_name_is_the_clients(
    start_proxy: ProxyFactory, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = await compact_after_fact(proxy, "own")
    own = {"type": "function", "function": {"name": "recall_context", "parameters": {"type": "object"}}}
    caplog.set_level(logging.INFO, "context_proxy.events")
    for _ in range(2):
        _, calls, _ = await ask(client, QUESTION, stream=False, tools=[own])
        assert [c.function.name for c in calls] == ["recall_context"], "the client's own tool call reaches it"
        assert proxy.fake.chats[-1]["tools"] == [own]
        answer = [{"role": "tool", "tool_call_id": calls[0].id, "content": "the client's own answer"}]
        await client.chat.completions.create(model="tiny-model", messages=answer, tools=[own])  # type: ignore[list-item]
    said = [r for r in caplog.records if "its own tool named recall_context" in r.getMessage()]
    assert len(said) == 1, "said once"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_new_context_forces_the_next_compaction(start_proxy: ProxyFactory, stream: bool) -> None:
    proxy = await start_proxy(strategy="summarize", tools={"new_context": True})
    client = proxy.client(default_headers={"X-Session-Id": "fresh"})
    await client.chat.completions.create(model="tiny-model", messages=[SYSTEM, {"role": "user", "content": "hi"}])
    for n in range(3):
        await ask(client, filler(n), stream=stream)
    assert tool_names(proxy.fake.chats[-1]) == ["new_context"], "offered; recall is not (no archive yet)"
    content, calls, _ = await ask(client, "That task is done: start a new context.", stream=stream)
    assert content.startswith("Noted") and calls == []
    assert proxy.fake.chats[-1]["messages"][-1]["content"] == "Starting a new context window."
    assert proxy.fake.summaries == [], "the budget never asked for one"
    raw = await client.chat.completions.with_raw_response.create(
        model="tiny-model", messages=[{"role": "user", "content": "next task"}]
    )
    assert raw.headers["X-Context-Window-Id"] == "win_1" and len(proxy.fake.summaries) == 1
    sent = proxy.fake.chats[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "user", "assistant", "user"]
    assert "context://archive/win_1" in sent[1]["content"] and sent[2]["content"].endswith("start a new context.")
    await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": "and on"}])
    assert len(proxy.fake.summaries) == 1, "the request is consumed by one compaction"
    _, journal = await session_json(proxy, "fresh")
    assert [w["id"] for w in journal["windows"]] == ["win_0", "win_1"]


async def test_new_context_with_one_turn_changes_nothing_and_says_why(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize", tools={"new_context": True})
    client = proxy.client(default_headers={"X-Session-Id": "short"})
    await ask(client, "start a new context", stream=False)
    raw = await client.chat.completions.with_raw_response.create(
        model="tiny-model", messages=[{"role": "user", "content": "go on"}]
    )
    assert raw.headers["X-Context-Window-Id"] == "win_0" and proxy.fake.summaries == []
    _, journal = await session_json(proxy, "short")
    (event,) = journal["events"]
    assert event["type"] == "compaction_skipped" and event["forced"] is True and "one turn" in event["reason"]


async def test_the_handoff_notice_goes_out_once_per_window_and_is_never_journaled(
    start_proxy: ProxyFactory,
) -> None:
    handoff = {"budget_tokens": 500, "prompt": "HANDOFF: about {n_remaining} tokens remain."}
    proxy = await start_proxy(strategy="summarize", handoff=handoff)
    client = proxy.client(default_headers={"X-Session-Id": "handoff"})
    windows = []
    for n in range(40):
        messages = [{"role": "user", "content": filler(n)}]
        raw = await client.chat.completions.with_raw_response.create(
            model="tiny-model", messages=[SYSTEM, *messages] if n == 0 else messages
        )
        windows.append(raw.headers["X-Context-Window-Id"])
    noticed = [(w, b) for w, b in zip(windows, proxy.fake.chats, strict=True) if "HANDOFF" in user_texts(b["messages"])]
    closed = sorted(set(windows), key=lambda w: int(w.split("_")[1]))[:-1]
    assert len(closed) >= 2
    assert [w for w, _ in noticed if w in closed] == closed, "exactly one request in each window that closed"
    for _, body in noticed:
        last = body["messages"][-1]["content"]
        assert "HANDOFF" not in user_texts(body["messages"][:-1]), "at the tail only"
        remaining = int(last.split("HANDOFF: about ")[1].split()[0])
        assert 0 <= remaining <= 500
    _, journal = await session_json(proxy, "handoff")
    assert "HANDOFF" not in str([t["input"] for t in journal["turns"]])
    _, context = await session_json(proxy, "handoff", suffix="/context")
    assert "HANDOFF" not in user_texts(context["messages"])


async def test_the_handoff_flag_survives_a_restart(start_proxy: ProxyFactory) -> None:
    handoff = {"budget_tokens": 5000, "prompt": "HANDOFF {n_remaining}"}
    first = await start_proxy(strategy="summarize", handoff=handoff)
    messages = [SYSTEM, {"role": "user", "content": "hello"}]
    await first.client(default_headers={"X-Session-Id": "restart"}).chat.completions.create(
        model="tiny-model", messages=messages
    )
    assert "HANDOFF" in first.fake.chats[-1]["messages"][-1]["content"]
    second = await start_proxy(strategy="summarize", handoff=handoff)
    await second.client(default_headers={"X-Session-Id": "restart"}).chat.completions.create(
        model="tiny-model", messages=[{"role": "user", "content": "again"}]
    )
    assert "HANDOFF" not in user_texts(second.fake.chats[-1]["messages"]), "the same window: no second notice"


async def test_no_handoff_notice_when_the_strategy_never_compacts(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="full", handoff={"budget_tokens": 5000, "prompt": "HANDOFF {n_remaining}"})
    client = proxy.client(default_headers={"X-Session-Id": "full"})
    await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": "hello"}])
    await client.chat.completions.create(
        model="tiny-model",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Context-Strategy": "summarize"},
    )
    assert ["HANDOFF" in user_texts(b["messages"]) for b in proxy.fake.chats] == [False, True]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_upstream_error_in_a_later_round_fails_the_turn(start_proxy: ProxyFactory, stream: bool) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = await compact_after_fact(proxy, "broken")
    with pytest.raises(openai.APIError):
        await ask(client, "What was the secret code? fail after recall", stream=stream)
    _, journal = await session_json(proxy, "broken")
    turn = journal["turns"][-1]
    assert turn["status"] == "failed" and turn["error"]["status"] == 500
    assert turn["rounds"][0]["message"]["tool_calls"][0]["function"]["name"] == "recall_context"
    content, _, _ = await ask(client, "hello again", stream=stream)
    assert content.startswith("Answer"), "the session goes on"


async def test_a_full_history_client_continues_after_a_recall_on_the_same_branch(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = proxy.client(default_headers={"X-Session-Id": "full-history"})
    history: list[dict[str, Any]] = [SYSTEM]
    questions = [FACT, *(filler(n) for n in range(40))]
    for question in questions:
        history.append({"role": "user", "content": question})
        raw = await client.chat.completions.with_raw_response.create(model="tiny-model", messages=history)
        history.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
        if raw.headers["X-Context-Window-Id"] == "win_1":
            break
    for question in (QUESTION, "thanks"):
        history.append({"role": "user", "content": question})
        answer = await client.chat.completions.create(model="tiny-model", messages=history)
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
    assert "PELICAN-42" in history[-3]["content"]
    _, journal = await session_json(proxy, "full-history")
    assert len(journal["branches"]) == 1, "the answer the client holds is the one journaled"
    assert [len(t.get("rounds") or ()) for t in journal["turns"][-2:]] == [1, 0]
