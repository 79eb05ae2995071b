"""Sessions end to end: delta and full-history clients, branches, tenants, concurrency."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from proxy.app import create_app
from proxy.app_state import TURNS
from proxy.sessions import tenant_of
from proxy.store import SessionKeys
from tests.conftest import Proxy, ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI

SYSTEM = {"role": "system", "content": "You are terse."}


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


async def full_history_conversation(client: openai.AsyncOpenAI, questions: list[str]) -> list[dict[str, Any]]:
    """A full-history client asking `questions` in turn; returns the conversation it holds."""
    history: list[dict[str, Any]] = [SYSTEM]
    for question in questions:
        history.append({"role": "user", "content": question})
        answer = await client.chat.completions.create(model="gpt-4o-mini", messages=history)
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
    return history


async def session_json(proxy: Proxy, session: str, key: str = "sk-test", suffix: str = "") -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{proxy.url}/v1/sessions/{session}{suffix}", headers={"Authorization": f"Bearer {key}"}) as r,
    ):
        return r.status, await r.json()


async def test_delta_client_turns_reach_upstream_as_one_conversation(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "delta-1"})
    for n in range(5):
        messages = [SYSTEM, {"role": "user", "content": f"question {n}"}]  # repeats its system prompt
        await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    seen = proxy.fake.chats[-1]["messages"]
    assert roles(seen) == ["system"] + ["user", "assistant"] * 4 + ["user"]
    assert [m["content"] for m in seen if m["role"] == "user"] == [f"question {n}" for n in range(5)]
    assert seen[0] == SYSTEM


async def test_full_history_client_is_not_duplicated(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "full-1"})
    history = await full_history_conversation(client, [f"q{n}" for n in range(5)])
    assert proxy.fake.chats[-1]["messages"] == history[:-1]
    status, body = await session_json(proxy, "full-1")
    assert status == 200 and len(body["turns"]) == 5
    assert [t["parent"] for t in body["turns"]] == [-1, 0, 1, 2, 3]


async def test_full_history_client_without_session_id_gets_a_stable_derived_session(proxy: Proxy) -> None:
    client = proxy.client()
    history: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": "derive me"}]
    sessions = set()
    for n in range(3):
        raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=history)
        sessions.add(raw.headers["X-Session-Id"])
        history += [
            {"role": "assistant", "content": raw.parse().choices[0].message.content},
            {"role": "user", "content": f"more {n}"},
        ]
    assert len(sessions) == 1
    status, body = await session_json(proxy, sessions.pop())
    assert status == 200 and len(body["turns"]) == 3 and len(body["branches"]) == 1


async def test_path_form_names_the_session(proxy: Proxy) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.url + "/s/path-sess/v1", api_key="sk-test", max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "one"}]
    )
    assert raw.headers["X-Session-Id"] == "path-sess"
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "two"}])
    assert roles(proxy.fake.chats[-1]["messages"]) == ["user", "assistant", "user"]
    models = await client.models.list()  # other routes under /s/{session}/v1 pass through
    assert any(m.id == "gpt-4o-mini" for m in models.data)


async def test_invalid_session_ids_are_refused(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "bad id with spaces"})
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert info.value.body["code"] == "invalid_session_id"  # type: ignore[index]
    long = proxy.client(default_headers={"X-Session-Id": "x" * 129})
    with pytest.raises(openai.BadRequestError):
        await long.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])


async def test_tenants_are_isolated(proxy: Proxy) -> None:
    alice = proxy.client("sk-alice", default_headers={"X-Session-Id": "shared"})
    bob = proxy.client("sk-bob", default_headers={"X-Session-Id": "shared"})
    await alice.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "alice secret"}])
    await bob.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "bob here"}])
    assert [m["content"] for m in proxy.fake.chats[-1]["messages"]] == ["bob here"]
    _, body = await session_json(proxy, "shared", "sk-bob", "/context")
    assert "alice secret" not in str(body)
    status, body = await session_json(proxy, "shared", "sk-alice")
    assert status == 200 and "bob here" not in str(body)
    status, _ = await session_json(proxy, "shared", "sk-carol")
    assert status == 404


async def test_concurrent_turns_are_all_journaled_once(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "busy"})
    await asyncio.gather(
        *(
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"c{n}"}])
            for n in range(40)
        )
    )
    status, body = await session_json(proxy, "busy")
    inputs = sorted(t["input"][0]["content"] for t in body["turns"])
    assert inputs == sorted(f"c{n}" for n in range(40))
    assert [t["parent"] for t in body["turns"]] == list(range(-1, 39)), "commit order is the journal order"
    status, context = await session_json(proxy, "busy", suffix="/context")
    assert len(context["messages"]) == 80


async def test_failed_turn_is_kept_out_of_later_context(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "failing"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "fine"}])
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "fail 500"}])
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "after"}])
    assert [m["content"] for m in proxy.fake.chats[-1]["messages"] if m["role"] == "user"] == ["fine", "after"]
    _, body = await session_json(proxy, "failing")
    assert [t["status"] for t in body["turns"]] == ["completed", "failed", "completed"]
    assert body["turns"][1]["error"]["status"] == 500


async def test_streamed_turn_is_in_next_history(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "streamy"})
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "tell me"}], stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream])
    _, journal = await session_json(proxy, "streamy")  # the turn is journaled before the stream ends
    assert journal["turns"][0]["status"] == "completed" and journal["turns"][0]["output"]["content"] == text
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "and then"}])
    assert proxy.fake.chats[-1]["messages"][1] == {"role": "assistant", "content": text}


async def test_streamed_tool_calls_are_assembled(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "tools"})
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "call tool weather"}], stream=True
    )
    calls = [
        c.choices[0].delta.tool_calls for c in [c async for c in stream] if c.choices and c.choices[0].delta.tool_calls
    ]
    call_id = calls[0][0].id
    tool = {"role": "tool", "tool_call_id": call_id, "content": "sunny"}
    await client.chat.completions.create(model="gpt-4o-mini", messages=[tool])
    seen = proxy.fake.chats[-1]["messages"]
    assert seen[1]["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"q": 1, "scope": "all"}'}
    assert seen[2] == tool


async def test_client_disconnect_mid_stream_marks_turn_canceled(proxy: Proxy) -> None:
    proxy.fake.chunk_delay_s = 0.05
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a long story " * 30}], "stream": True}
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url + "/v1/chat/completions", json=body, headers={"X-Session-Id": "gone"}) as r:
            await r.content.readuntil(b"\n\n")
    for _ in range(100):
        status, journal = await session_json(proxy, "gone", "sk-default")
        if status == 200:
            break
        await asyncio.sleep(0.05)
    assert journal["turns"][0]["status"] == "canceled"


async def test_edited_message_starts_a_branch_and_old_path_stays(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "branchy"})
    history = await full_history_conversation(client, ["first", "second", "third"])
    edited = history[:3] + [{"role": "user", "content": "second, edited"}]
    await client.chat.completions.create(model="gpt-4o-mini", messages=edited)
    assert proxy.fake.chats[-1]["messages"] == edited
    _, body = await session_json(proxy, "branchy")
    assert len(body["branches"]) == 2
    assert body["turns"][3]["parent"] == 0
    active = [b for b in body["branches"] if b["active"]][0]
    assert active["turns"] == [0, 3]
    _, context = await session_json(proxy, "branchy", suffix="/context")
    assert [m["content"] for m in context["messages"] if m["role"] == "user"] == ["first", "second, edited"]
    regenerate = history[:3]  # the first answer asked again: a branch from the root
    await client.chat.completions.create(model="gpt-4o-mini", messages=regenerate[:2])
    _, body = await session_json(proxy, "branchy")
    assert body["turns"][4]["parent"] == -1


async def test_strategy_off_is_pure_pass_through(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "offline", "X-Context-Strategy": "off"})
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]
    )
    assert "X-Context-Window-Id" not in raw.headers
    status, _ = await session_json(proxy, "offline")
    assert status == 404


async def test_delete_forgets_the_session(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "forget-me"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "remember"}])
    async with aiohttp.ClientSession() as http:
        async with http.delete(proxy.url + "/v1/sessions/forget-me", headers={"Authorization": "Bearer sk-test"}) as r:
            assert r.status == 200 and (await r.json())["deleted"] is True
    status, _ = await session_json(proxy, "forget-me")
    assert status == 404
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "fresh"}])
    assert proxy.fake.chats[-1]["messages"] == [{"role": "user", "content": "fresh"}]


async def test_history_survives_a_restart(fake: FakeOpenAI, tmp_path: Path, aiohttp_client: Any) -> None:
    settings = make_settings("embedded", fake.url)  # type: ignore[attr-defined]
    settings = type(settings)(
        **{**settings.__dict__, "redis": type(settings.redis)(url="embedded", data_dir=str(tmp_path / "d"))}
    )
    for text in ("before restart", "after restart"):
        client = await aiohttp_client(create_app(settings))
        r = await client.post("/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]},
                              headers={"X-Session-Id": "durable", "Authorization": "Bearer k"})  # fmt: skip
        assert r.status == 200
        await client.close()
    assert [m["content"] for m in fake.chats[-1]["messages"] if m["role"] == "user"] == [
        "before restart",
        "after restart",
    ]


async def test_replicas_share_sessions_and_caches_never_go_stale(start_proxy: ProxyFactory) -> None:
    first, second = await start_proxy(), await start_proxy()
    a = first.client(default_headers={"X-Session-Id": "shared-replicas"})
    b = second.client(default_headers={"X-Session-Id": "shared-replicas"})
    for n in range(6):
        await (a if n % 2 else b).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"r{n}"}]
        )
    assert [m["content"] for m in first.fake.chats[-1]["messages"] if m["role"] == "user"] == [
        f"r{n}" for n in range(6)
    ]
    async with (
        aiohttp.ClientSession() as http,
        http.delete(second.url + "/v1/sessions/shared-replicas", headers={"Authorization": "Bearer sk-test"}) as r,
    ):
        assert r.status == 200
    for n in range(7):  # the recreated session reaches the seq numbers the first replica has cached
        await b.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"new{n}"}])
    await a.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "last"}])
    users = [m["content"] for m in first.fake.chats[-1]["messages"] if m["role"] == "user"]
    assert users == [f"new{n}" for n in range(7)] + ["last"]


async def test_without_the_path_cache_every_load_is_whole(
    start_proxy: ProxyFactory, flushed_redis: str, fake: FakeOpenAI
) -> None:
    import dataclasses

    settings = make_settings(flushed_redis, fake.url)  # type: ignore[attr-defined]
    settings = dataclasses.replace(settings, server=dataclasses.replace(settings.server, cache_messages=0))
    proxy = await start_proxy(settings)
    client = proxy.client(default_headers={"X-Session-Id": "uncached"})
    for n in range(4):
        await client.chat.completions.create(
            model="gpt-4o-mini", messages=[SYSTEM, {"role": "user", "content": f"q{n}"}]
        )
    assert roles(proxy.fake.chats[-1]["messages"]) == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert len(proxy.app[TURNS].deps.paths) == 0


async def test_a_journaled_turn_extends_the_cache_so_the_next_load_reads_no_turn(
    proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = proxy.app[TURNS].deps
    loaded: list[int] = []
    load = deps.store.load_context

    async def counting(*args: Any, **kwargs: Any) -> Any:
        result = await load(*args, **kwargs)
        loaded.append(len(result.turns))
        return result

    monkeypatch.setattr(deps.store, "load_context", counting)
    client = proxy.client(default_headers={"X-Session-Id": "extended"})
    for n in range(4):
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"q{n}"}])
    assert loaded == [0, 1, 0, 0]  # a new session has no path to cache until its first turn is read
    assert [m["content"] for m in proxy.fake.chats[-1]["messages"] if m["role"] == "user"] == ["q0", "q1", "q2", "q3"]
    _, journal = await session_json(proxy, "extended")
    entry = deps.paths.get(SessionKeys(tenant_of("Bearer sk-test", ""), "extended"))
    assert entry is not None and entry.head == journal["turns"][-1]["seq"]


async def test_editing_far_back_in_a_long_full_history_conversation_branches_there(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "long-edit"})
    history = await full_history_conversation(client, [f"q{n}" for n in range(40)])
    edited = [
        *history[:3],
        {"role": "user", "content": "q1, edited"},
        *history[4:],
        {"role": "user", "content": "next"},
    ]
    await client.chat.completions.create(model="gpt-4o-mini", messages=edited)
    assert proxy.fake.chats[-1]["messages"] == edited
    _, journal = await session_json(proxy, "long-edit")
    branch = journal["turns"][40:]  # the edited exchange and the 38 after it are imported on the new branch
    assert branch[0]["parent"] == 0 and [t["parent"] for t in branch[1:]] == [t["seq"] for t in branch[:-1]]
    assert len(branch) == 40 and len(journal["branches"]) == 2
