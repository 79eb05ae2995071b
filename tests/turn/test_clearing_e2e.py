"""Mechanical clearing end to end: what the model receives, and what the journal keeps."""

from __future__ import annotations

from typing import Any

from proxy.context.clearing import CLEARED
from tests.conftest import ProxyFactory
from tests.handlers.test_sessions import session_json


async def tool_round(client: Any, name: str, n: int) -> None:
    answer = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": f"step {n}: call tool {name}"}]
    )
    call = answer.choices[0].message.tool_calls[0]
    tool = {"role": "tool", "tool_call_id": call.id, "content": f"{name} output {n} " * 30}
    await client.chat.completions.create(model="gpt-4o-mini", messages=[tool])


async def test_old_tool_results_are_cleared_in_what_is_sent(start_proxy: ProxyFactory) -> None:
    clear = [{"target": "tool-result", "keep_recent": 1, "tool_filter": ["run_bash", "read_file"],
              "exempt_tools": ["read_file"]}]  # fmt: skip
    proxy = await start_proxy(strategy="full", compact={"clear": clear})
    client = proxy.client(default_headers={"X-Session-Id": "clearing"})
    for n, name in enumerate(["run_bash", "read_file", "run_bash", "search", "run_bash"]):
        await tool_round(client, name, n)
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "done?"}])
    sent = [m for m in proxy.fake.chats[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"] == CLEARED for m in sent] == [True, False, True, False, False]
    assert all(m["tool_call_id"] for m in sent)
    assert "read_file output 1" in sent[1]["content"] and "search output 3" in sent[3]["content"]
    _, journal = await session_json(proxy, "clearing")
    kept = [m for t in journal["turns"] for m in t["input"] if m["role"] == "tool"]
    assert all(CLEARED not in m["content"] for m in kept), "the journal keeps every result"


async def test_thinking_and_think_tags_are_stripped(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="full", compact={"clear": ["thinking", "reasoning-tags"]})
    client = proxy.client(default_headers={"X-Session-Id": "thinker"})
    reasoned = {"role": "assistant", "content": "Paris.", "reasoning_content": "The capital of France is Paris."}
    history = [{"role": "user", "content": "Capital of France?"}, reasoned, {"role": "user", "content": "And Italy?"}]
    await client.chat.completions.create(model="gpt-4o-mini", messages=history)  # the fake refuses reasoning fields
    assert proxy.fake.chats[-1]["messages"][1] == {"role": "assistant", "content": "Paris."}
    answer = await client.chat.completions.create(model="open-reasoner", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content.startswith("<think>")
    await client.chat.completions.create(model="open-reasoner", messages=[{"role": "user", "content": "again"}])
    sent = proxy.fake.chats[-1]["messages"]
    assert all("reasoning_content" not in m for m in sent)
    assert [m["content"] for m in sent if m["role"] == "assistant"][-1].startswith("Answer 3")
    _, journal = await session_json(proxy, "thinker")
    assert journal["turns"][0]["output"]["reasoning_content"] == "The capital of France is Paris.", (
        "imported as it came"
    )
    assert journal["turns"][3]["output"]["content"].startswith("<think>")
