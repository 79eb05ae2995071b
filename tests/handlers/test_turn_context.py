"""`GET /v1/sessions/{id}/turns/{seq}/context`: every past turn's prompt rebuilt exactly as sent."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from tests.conftest import Proxy, ProxyFactory
from tests.handlers.test_sessions import session_json
from tests.ui.scenario import EDITED, MARKUP, PINNED, SYSTEM, build_session, filler


async def turn_context(proxy: Proxy, session: str, seq: int | str, key: str = "sk-test") -> tuple[int, Any]:
    return await session_json(proxy, session, key, suffix=f"/turns/{seq}/context")


async def assert_every_turn_exact(proxy: Proxy, session: str) -> list[dict[str, Any]]:
    _, journal = await session_json(proxy, session)
    chats = proxy.fake.chats
    assert len(journal["turns"]) == len(chats), "one upstream request per turn"
    replays = []
    for turn, sent in zip(journal["turns"], chats, strict=True):
        status, replay = await turn_context(proxy, session, turn["seq"])
        assert status == 200
        assert replay["messages"] == sent["messages"], f"turn {turn['seq']} ({turn['window']}) rebuilt exactly"
        assert replay["window"] == turn["window"]
        replays.append(replay)
    return replays


async def test_every_turn_of_a_twice_compacted_session_is_rebuilt_exactly(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    windows = await build_session(proxy, "inspect")
    assert len({w for w in windows if w}) >= 3, "two compactions happened"
    replays = await assert_every_turn_exact(proxy, "inspect")
    last = replays[-1]
    kinds = [s["kind"] for s in last["sources"]]
    assert kinds[0] == "leading" and last["messages"][0] == SYSTEM
    assert kinds[1] == "summary" and "context://archive/win_" in last["messages"][1]["content"]
    pinned = [m for m, s in zip(last["messages"], last["sources"]) if s["kind"] == "pinned"]
    assert {k: v for k, v in PINNED.items() if k != "pinned"} in pinned, "the pinned message is lifted out of the span"
    marked = [m for m, s in zip(last["messages"], last["sources"]) if s["pinned"]]
    assert marked == [{k: v for k, v in PINNED.items() if k != "pinned"}], "the marked message itself is flagged"
    assert kinds[-1] == "input" and set(kinds[2 + len(pinned) : -1]) == {"history"}
    assert last["summarized"] is True
    assert sum(s["tokens"] for s in last["sources"]) == last["tokens"]
    assert last["context_window"] == 3000
    assert 0.95 * 2100 <= last["trigger"] <= 2100, (
        "the turn's own trigger: 70% of the window, calibrated to the local count"
    )
    assert last["context_tokens"] and last["prompt_tokens"], "the proxy's count beside the reported usage"
    markup = [r for r in replays if r["messages"][-1].get("content") == MARKUP]
    assert markup and markup[0]["sources"][-1]["kind"] == "input"
    branch = next(r for r in replays if r["messages"][-1].get("content") == EDITED)
    assert [s["turn"] for s in branch["sources"]] == [0, 0, 0, 0, 2], "the edit sees turn 0 only, not turn 1"


async def test_next_is_what_the_context_endpoint_sends(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await build_session(proxy, "next")
    _, nxt = await turn_context(proxy, "next", "next")
    _, context = await session_json(proxy, "next", suffix="/context?model=tiny-model")
    assert nxt["messages"] == context["messages"] and nxt["tokens"] == context["tokens"]
    assert nxt["turn"] == "next" and nxt["window"] == context["window"]


@pytest.mark.parametrize("strategy", ["reset", "anchored", "turns", "background(summarize)"])
async def test_other_strategies_are_rebuilt_exactly(start_proxy: ProxyFactory, strategy: str) -> None:
    proxy = await start_proxy(strategy=strategy, keep_recent=4, compact_after=10)
    await build_session(proxy, "s", compactions=1)
    await proxy.idle()
    await assert_every_turn_exact(proxy, "s")


async def test_a_branch_from_before_the_boundary_is_rebuilt_without_the_summary(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await build_session(proxy, "fork", compactions=1)
    _, journal = await session_json(proxy, "fork")
    root = journal["turns"][0]
    answer = {"role": "assistant", "content": root["output"]["content"]}
    edit = [SYSTEM, PINNED, filler(0), answer, {"role": "user", "content": "start over"}]
    await proxy.client(default_headers={"X-Session-Id": "fork"}).chat.completions.create(
        model="tiny-model", messages=edit
    )
    replays = await assert_every_turn_exact(proxy, "fork")
    assert replays[-1]["summarized"] is False and replays[-1]["window"] != "win_0"


async def test_unknown_turns_sessions_and_keys_are_404_and_bad_seqs_400(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="full")
    await proxy.client(default_headers={"X-Session-Id": "x"}).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    assert (await turn_context(proxy, "x", 0))[0] == 200
    for session, seq, key, expected in [
        ("x", 5, "sk-test", 404),
        ("x", 0, "sk-other", 404),
        ("y", 0, "sk-test", 404),
        ("x", "-1", "sk-test", 400),
        ("x", "abc", "sk-test", 400),
    ]:
        status, body = await turn_context(proxy, session, seq, key)
        assert status == expected and set(body["error"]) == {"message", "type", "param", "code"}


async def test_a_compaction_on_a_branch_that_left_before_the_boundary_is_rebuilt(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await build_session(proxy, "refork", compactions=1)
    _, journal = await session_json(proxy, "refork")
    root = journal["turns"][0]
    edit = [SYSTEM, PINNED, filler(0), {"role": "assistant", "content": root["output"]["content"]}]
    client = proxy.client(default_headers={"X-Session-Id": "refork"})
    await client.chat.completions.create(model="tiny-model", messages=[*edit, {"role": "user", "content": "over"}])
    for n in range(40):  # the new branch, continued by a delta client, compacts from a fresh window
        await client.chat.completions.create(model="tiny-model", messages=[filler(100 + n)])
    _, journal = await session_json(proxy, "refork")
    again = [w for w in journal["windows"][2:] if w["evicted_turns"][0] == 0]
    assert again and again[0] != journal["windows"][-1], "the branch compacted from the root, then on from there"
    replays = await assert_every_turn_exact(proxy, "refork")
    assert replays[-1]["summarized"] is True


async def test_a_changed_system_prompt_is_rebuilt_exactly(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await build_session(proxy, "persona", compactions=1)
    client = proxy.client(default_headers={"X-Session-Id": "persona"})
    pirate = {"role": "system", "content": "You are now a pirate. Answer like one."}
    await client.chat.completions.create(model="tiny-model", messages=[pirate, filler(300)])
    for n in range(30):  # a compaction lands while the pirate prompt is the session's
        await client.chat.completions.create(model="tiny-model", messages=[filler(301 + n)])
    await client.chat.completions.create(model="tiny-model", messages=[SYSTEM, filler(400)])
    await client.chat.completions.create(model="tiny-model", messages=[filler(401)])
    _, journal = await session_json(proxy, "persona")
    assert len({t["window"] for t in journal["turns"]}) >= 4
    replays = await assert_every_turn_exact(proxy, "persona")
    firsts = [r["messages"][0] for r in replays]
    assert pirate in firsts and firsts[-1] == SYSTEM
    assert all(r["sources"][0]["kind"] == "leading" for r in replays)


async def test_a_system_prompt_sent_with_a_compacting_request_that_failed_is_rebuilt(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await build_session(proxy, "failed-persona", compactions=1)
    _, before = await session_json(proxy, "failed-persona")
    client = proxy.client(default_headers={"X-Session-Id": "failed-persona"})
    pirate = {"role": "system", "content": "You are now a pirate. Answer like one."}
    big = " ".join(filler(500 + n)["content"] for n in range(6)) + " and then fail 500"
    with pytest.raises(openai.InternalServerError):  # it compacts under the pirate prompt, then the upstream fails
        await client.chat.completions.create(model="tiny-model", messages=[pirate, {"role": "user", "content": big}])
    await client.chat.completions.create(model="tiny-model", messages=[filler(600)])
    _, after = await session_json(proxy, "failed-persona")
    assert len(after["windows"]) == len(before["windows"]) + 1 and after["turns"][-2]["status"] == "failed"
    replays = await assert_every_turn_exact(proxy, "failed-persona")
    assert replays[-1]["messages"][0] == pirate, "the window kept the prompt of the request that compacted it"


async def test_turns_after_a_clear_are_rebuilt_exactly(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await build_session(proxy, "cleared", compactions=1)
    async with aiohttp.ClientSession() as http:
        url = f"{proxy.url}/v1/sessions/cleared/clear"
        async with http.post(url, headers={"Authorization": "Bearer sk-test"}) as r:
            assert r.status == 200
    client = proxy.client(default_headers={"X-Session-Id": "cleared"})
    for n in range(3):
        await client.chat.completions.create(model="tiny-model", messages=[filler(700 + n)])
    replays = await assert_every_turn_exact(proxy, "cleared")
    kinds = [s["kind"] for s in replays[-1]["sources"]]
    assert "summary" not in kinds and "pinned" in kinds and kinds[0] == "leading", "only the lead and pins survive"
    assert replays[-1]["caveats"] == []


async def test_options_the_journal_cannot_replay_are_named(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize", compact={"clear": ["tool-result"]}, use_preferred=True)
    await proxy.client(default_headers={"X-Session-Id": "c"}).chat.completions.create(
        model="tiny-model", messages=[{"role": "user", "content": "hi"}]
    )
    _, replay = await turn_context(proxy, "c", 0)
    assert [c.split(":")[0] for c in replay["caveats"]] == ["context.compact.clear", "use_preferred"]
