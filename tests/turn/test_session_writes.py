"""Clearing a context and feedback on turns, through the session API, as the model then sees it."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.conftest import Proxy, ProxyFactory
from tests.handlers.test_sessions import SYSTEM, full_history_conversation, session_json

PINNED = {"role": "user", "content": "Policy: answer in English.", "pinned": True}


async def post(proxy: Proxy, path: str, body: Any = None, key: str = "sk-test") -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{proxy.url}/v1/sessions/{path}", json=body, headers={"Authorization": f"Bearer {key}"}) as r,
    ):
        return r.status, await r.json()


async def test_clear_starts_a_fresh_lineage_and_keeps_the_journal(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "clean"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[SYSTEM, PINNED])
    for n in range(3):
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"q{n}"}])
    status, cleared = await post(proxy, "clean/clear")
    assert status == 200 and cleared["window"] == "win_1" and cleared["cleared_turns"] == [0, 1, 2, 3]
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "fresh start"}]
    )
    assert raw.headers["X-Context-Window-Id"] == "win_1"
    pinned = {k: v for k, v in PINNED.items() if k != "pinned"}
    sent = proxy.fake.chats[-1]["messages"]
    assert sent[:2] == [SYSTEM, pinned] and sent[-1] == {"role": "user", "content": "fresh start"}
    assert len(sent) == 4, "the pinned turn is kept whole (its answer too); nothing else from before the clear"
    _, journal = await session_json(proxy, "clean")
    assert len(journal["turns"]) == 5 and journal["events"][-1]["type"] == "clear"
    assert journal["window"] == {"current": "win_1", "previous": None, "first": "win_1"}
    status, archived = await session_json(proxy, "clean", suffix="/archive/win_1")
    assert status == 200 and {"role": "user", "content": "q2"} in archived["messages"]
    status, _ = await post(proxy, "nobody/clear")
    assert status == 404
    status, _ = await post(proxy, "clean/clear", key="sk-other")
    assert status == 404, "another tenant's session is not found"


async def test_clear_for_a_full_history_client(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "resend"})
    history = await full_history_conversation(client, ["one", "two"])
    assert (await post(proxy, "resend/clear"))[0] == 200
    await client.chat.completions.create(model="gpt-4o-mini", messages=[*history, {"role": "user", "content": "3"}])
    assert proxy.fake.chats[-1]["messages"] == [SYSTEM, {"role": "user", "content": "3"}]


async def test_feedback_is_appended_shown_and_validated(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "rated"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}])
    assert (await post(proxy, "rated/turns/0/feedback", {"rating": 1, "comment": "good"}))[0] == 200
    status, body = await post(proxy, "rated/turns/0/feedback", {"preferred": "Hi there!"})
    assert status == 200 and body["feedback"]["preferred"] == "Hi there!"
    _, journal = await session_json(proxy, "rated")
    feedback = journal["turns"][0]["feedback"]
    assert [(f.get("rating"), f.get("comment"), f.get("preferred")) for f in feedback] == [
        (1, "good", None), (None, None, "Hi there!"),
    ]  # fmt: skip
    assert journal["turns"][0]["output"]["content"].startswith("Answer 1"), "the turn itself is never edited"
    for body, param in (({"rating": 5}, "rating"), ({"rating": True}, "rating"), ({"preferred": ""}, "preferred"),
                        ({"stars": 1}, "stars"), ({}, None), ([1], None)):  # fmt: skip
        status, error = await post(proxy, "rated/turns/0/feedback", body)
        assert status == 400 and error["error"]["param"] == param, body
    assert (await post(proxy, "rated/turns/7/feedback", {"rating": 1}))[0] == 404
    assert (await post(proxy, "rated/turns/x/feedback", {"rating": 1}))[0] == 400


@pytest.mark.parametrize("use_preferred", [True, False])
async def test_use_preferred_sends_the_preferred_reply(start_proxy: ProxyFactory, use_preferred: bool) -> None:
    proxy = await start_proxy(strategy="full", use_preferred=use_preferred)
    client = proxy.client(default_headers={"X-Session-Id": "edits"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[SYSTEM, {"role": "user", "content": "hi"}])
    await post(proxy, "edits/turns/0/feedback", {"preferred": "first edit"})
    await post(proxy, "edits/turns/0/feedback", {"preferred": "Hello! How can I help?"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "next"}])
    reply = proxy.fake.chats[-1]["messages"][2]["content"]
    assert (reply == "Hello! How can I help?") is use_preferred
    _, context = await session_json(proxy, "edits", suffix="/context")
    assert (context["messages"][2]["content"] == "Hello! How can I help?") is use_preferred
