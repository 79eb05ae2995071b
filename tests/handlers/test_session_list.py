"""`GET /v1/sessions`: the caller's own sessions, newest first, paged as OpenAI lists are."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import Proxy


async def list_json(proxy: Proxy, key: str = "sk-test", query: str = "") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession() as http, http.get(f"{proxy.url}/v1/sessions{query}", headers=headers) as r:
        return r.status, await r.json()


async def say(proxy: Proxy, session: str, key: str = "sk-test", turns: int = 1) -> None:
    client = proxy.client(key, default_headers={"X-Session-Id": session})
    for n in range(turns):
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"hi {n}"}])


async def test_a_key_lists_its_own_sessions_newest_first_in_pages(proxy: Proxy) -> None:
    for n in range(5):
        await say(proxy, f"s{n}", turns=n + 1)
    await say(proxy, "s1")  # used again: newest now (the index orders to the millisecond)
    await say(proxy, "theirs", key="sk-other")
    status, page = await list_json(proxy, query="?limit=2")
    assert status == 200 and page["object"] == "list" and page["has_more"] is True
    ids = [s["id"] for s in page["data"]]
    assert ids[0] == "s1"
    while page["has_more"]:
        status, page = await list_json(proxy, query=f"?limit=2&after={page['last_id']}")
        ids += [s["id"] for s in page["data"]]
    assert sorted(ids) == [f"s{n}" for n in range(5)] and ids[0] == "s1", "every session once, none of another key"
    _, whole = await list_json(proxy)
    assert [s["id"] for s in whole["data"]] == ids
    used = [s["last_used"] for s in whole["data"]]
    assert used == sorted(used, reverse=True)
    item = next(s for s in whole["data"] if s["id"] == "s3")
    assert item["turns"] == 4 and item["window"] == "win_0" and item["model"] == "gpt-4o-mini"
    assert item["tokens"] > 0 and item["prompt_tokens"] > 0 and item["last_used"] >= item["created"] > 0
    _, other = await list_json(proxy, key="sk-other")
    assert [s["id"] for s in other["data"]] == ["theirs"]
    _, nobody = await list_json(proxy, key="sk-nobody")
    assert nobody == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}


async def test_bad_paging_is_a_clear_400(proxy: Proxy) -> None:
    for query in ("?limit=0", "?limit=101", "?limit=x", "?after=bad%20id", "?after=no-such-session"):
        status, body = await list_json(proxy, query=query)
        assert status == 400 and body["error"]["param"] in ("limit", "after")


async def test_sessions_are_listed_newest_first_with_their_figures(proxy: Proxy) -> None:
    for session in ("first", "second", "third"):
        await say(proxy, session)
    await say(proxy, "first")
    status, body = await list_json(proxy)
    assert status == 200
    assert [s["id"] for s in body["data"]] == ["first", "third", "second"]
    assert (body["object"], body["first_id"], body["last_id"], body["has_more"]) == ("list", "first", "second", False)
    first = body["data"][0]
    assert first["object"] == "session" and first["turns"] == 2 and first["window"] == "win_0"
    assert first["prompt_tokens"] == proxy.fake.prompt_tokens(proxy.fake.chats[-1]["messages"]) > 0
    assert first["created"] <= first["last_used"]


async def test_a_deleted_session_leaves_the_list(proxy: Proxy) -> None:
    await say(proxy, "kept")
    await say(proxy, "gone")
    headers = {"Authorization": "Bearer sk-test"}
    async with aiohttp.ClientSession() as http, http.delete(proxy.url + "/v1/sessions/gone", headers=headers) as r:
        assert r.status == 200
    _, body = await list_json(proxy)
    assert [s["id"] for s in body["data"]] == ["kept"]
