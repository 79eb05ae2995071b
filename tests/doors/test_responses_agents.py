"""The openai-agents SDK with its default model (the Responses API), unchanged, through the proxy."""

from __future__ import annotations

import pytest
from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from agents.models import _openai_shared
from openai import AsyncOpenAI

from tests.conftest import Proxy

looked_up: list[tuple[int, str]] = []


@function_tool
def lookup(q: int, scope: str) -> str:
    """Look a number up in the archive."""
    looked_up.append((q, scope))
    return f"entry {q} of {scope}: the launch is on Tuesday"


@pytest.fixture
def agents_client(proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's default client pointed at the proxy, as an app configures it; the SDK's own
    default comes back after the test."""
    monkeypatch.setattr(_openai_shared, "_default_openai_client", None)
    set_tracing_disabled(True)
    set_default_openai_client(AsyncOpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0))
    looked_up.clear()


@pytest.mark.usefixtures("agents_client")
async def test_an_agent_with_a_function_tool_and_a_handoff(proxy: Proxy) -> None:
    second = Agent(name="second_agent", instructions="You are the specialist.", model="gpt-4o-mini")
    first = Agent(
        name="first_agent",
        instructions="You are the front desk.",
        model="gpt-4o-mini",
        tools=[lookup],
        handoffs=[second],
    )
    asked = await Runner.run(first, "call tool lookup")
    assert looked_up == [(1, "all")]
    assert asked.last_agent is first and asked.final_output.startswith("Answer 1")
    answered = proxy.fake.chats[-1]["messages"]
    assert answered[0] == {"role": "system", "content": "You are the front desk."}
    assert answered[-1]["role"] == "tool" and "launch is on Tuesday" in answered[-1]["content"]
    assert {t["function"]["name"] for t in proxy.fake.chats[-1]["tools"]} == {"lookup", "transfer_to_second_agent"}

    follow = [*asked.to_input_list(), {"role": "user", "content": "call tool transfer_to_second_agent"}]
    handed = await Runner.run(first, follow)
    assert handed.last_agent is second and handed.final_output.startswith("Answer 2")
    sent = proxy.fake.chats[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "You are the specialist."}
    contents = [m.get("content") for m in sent]
    assert contents.count("call tool lookup") == 1 and contents.count("call tool transfer_to_second_agent") == 1
    assert looked_up == [(1, "all")]


@pytest.mark.usefixtures("agents_client")
async def test_a_streamed_agent_run_calls_its_tool(proxy: Proxy) -> None:
    agent = Agent(name="streamer", instructions="Stream.", model="gpt-4o-mini", tools=[lookup])
    run = Runner.run_streamed(agent, "call tool lookup")
    kinds = {event.type async for event in run.stream_events()}
    assert "raw_response_event" in kinds and looked_up == [(1, "all")]
    assert str(run.final_output).startswith("Answer 1")
    assert all(chat["stream"] for chat in proxy.fake.chats)
