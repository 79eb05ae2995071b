"""Gateway mode: keys required under /v1 and /s, never forwarded, tenants by key name, allow-lists."""

from __future__ import annotations

import gzip

import aiohttp
import openai
import orjson
import pytest

from proxy.gateway.policy import hash_secret
from tests.conftest import Proxy, ProxyFactory
from tests.fake_upstream import FakeOpenAI
from tests.gateway.conftest import ALICE, BOB, admin, call, gateway_settings

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def gateway(start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str) -> Proxy:
    keys = [
        {"name": "alice", "key_sha256": hash_secret(ALICE)},
        {"name": "bob", "key": BOB, "models": ["gpt-4o-mini", "text-embedding-*"]},
    ]
    return await start_proxy(gateway_settings(flushed_redis, fake.url, keys=keys))  # type: ignore[attr-defined]


async def test_a_gateway_key_is_required_and_never_reaches_the_upstream(gateway: Proxy) -> None:
    with pytest.raises(openai.AuthenticationError) as info:
        await gateway.client("sk-someone-elses").chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert info.value.code == "invalid_api_key"
    assert gateway.fake.received == []
    answer = await gateway.client(ALICE).chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert answer.choices[0].message.content
    stream = await gateway.client(ALICE).chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
    assert [chunk async for chunk in stream]
    await gateway.client(BOB).embeddings.create(model="text-embedding-3-small", input="x")
    await gateway.client(BOB).models.list()
    assert {h["Authorization"] for h in gateway.fake.headers} == {"Bearer sk-default"}
    assert {h["Authorization"] for h in gateway.fake.other_headers} == {"Bearer sk-default"}
    status, body, _ = await call("GET", gateway.url + "/v1/echo/x", key=ALICE)
    assert status == 200 and body["authorization"] == "Bearer sk-default"


async def test_every_guarded_route_answers_401_without_a_key_and_health_stays_open(gateway: Proxy) -> None:
    for method, path in (("POST", "/v1/chat/completions"), ("POST", "/s/s1/v1/chat/completions"),
                         ("GET", "/v1/models"), ("GET", "/s/s1/v1/echo/x"), ("GET", "/v1/sessions/s1"),
                         ("DELETE", "/v1/sessions/s1")):  # fmt: skip
        status, body, _ = await call(method, gateway.url + path, key=None, json={"model": "gpt-4o-mini"})
        assert (status, body["error"]["code"], body["error"]["type"]) == (
            401,
            "invalid_api_key",
            "invalid_request_error",
        )
    async with aiohttp.ClientSession() as http:
        for path in ("/healthz", "/readyz", "/metrics"):
            async with http.get(gateway.url + path) as r:
                assert r.status == 200, path


async def test_tenant_is_the_key_name_so_a_rotated_key_keeps_its_sessions(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    proxy = await start_proxy(gateway_settings(flushed_redis, fake.url))  # type: ignore[attr-defined]
    status, created = await admin("POST", proxy.url + "/admin/keys", json={"name": "carol"})
    assert status == 201
    carol = proxy.client(created["key"], default_headers={"X-Session-Id": "plans"})
    await carol.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "remember 42"}])
    status, _, _ = await call("GET", proxy.url + "/v1/sessions/plans", key=ALICE)
    assert status == 404, "another key's tenant must not see carol's session"

    assert (await admin("DELETE", proxy.url + "/admin/keys/carol"))[0] == 200
    status, rotated = await admin("POST", proxy.url + "/admin/keys", json={"name": "carol"})
    assert status == 201 and rotated["key"] != created["key"]
    status, _, _ = await call("GET", proxy.url + "/v1/sessions/plans", key=created["key"])
    assert status == 401, "the revoked secret no longer works"
    status, session, _ = await call("GET", proxy.url + "/v1/sessions/plans", key=rotated["key"])
    assert status == 200 and len(session["turns"]) == 1
    status, listed, _ = await call("GET", proxy.url + "/v1/sessions", key=rotated["key"])
    assert status == 200 and [s["id"] for s in listed["data"]] == ["plans"]
    assert (await call("GET", proxy.url + "/v1/sessions", key=ALICE))[1]["data"] == []
    new = proxy.client(rotated["key"], default_headers={"X-Session-Id": "plans"})
    await new.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "and now?"}])
    assert [m["content"] for m in fake.chats[-1]["messages"] if m["role"] == "user"] == ["remember 42", "and now?"]


async def test_allow_list_refuses_other_models_managed_and_passed_through(gateway: Proxy) -> None:
    bob = gateway.client(BOB)
    await bob.chat.completions.create(model="gpt-4o-mini", messages=HI)
    for call_model in (
        lambda: bob.chat.completions.create(model="gpt-4o", messages=HI),
        lambda: bob.chat.completions.create(model="gpt-4o", messages=HI, extra_headers={"X-Context-Strategy": "off"}),
        lambda: bob.embeddings.create(model="other-embedding", input="x"),
    ):
        with pytest.raises(openai.PermissionDeniedError) as info:
            await call_model()
        assert info.value.status_code == 403 and info.value.code == "model_not_allowed"
    await bob.embeddings.create(model="text-embedding-3-large", input="x")
    await bob.models.list()
    assert [c["model"] for c in gateway.fake.chats] == ["gpt-4o-mini"]


async def test_anonymous_callers_when_allowed(start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str) -> None:
    proxy = await start_proxy(gateway_settings(flushed_redis, fake.url, allow_anonymous=True))  # type: ignore[attr-defined]
    status, _, _ = await call("GET", proxy.url + "/v1/echo/x", key=None)
    assert status == 200
    with pytest.raises(openai.AuthenticationError):
        await proxy.client("sk-wrong").models.list()


async def test_without_gateway_keys_clients_use_their_own_keys_as_before(proxy: Proxy) -> None:
    await proxy.client("sk-own").chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert proxy.fake.headers[-1]["Authorization"] == "Bearer sk-own"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings"])
async def test_an_encoded_body_does_not_hide_its_model_from_the_allow_list(gateway: Proxy, path: str) -> None:
    body = {"model": "gpt-4o", "messages": HI} if "chat" in path else {"model": "other-embedding", "input": "x"}
    headers = {"Authorization": f"Bearer {BOB}", "Content-Type": "application/json", "Content-Encoding": "gzip"}
    async with aiohttp.ClientSession() as http:
        compressed = gzip.compress(orjson.dumps(body))
        async with http.post(gateway.url + path, data=compressed, headers=headers) as r:
            assert r.status == 403 and (await r.json())["error"]["code"] == "model_not_allowed"
        headers["Content-Encoding"] = "br"  # one the proxy cannot read: refused, not waved through
        async with http.post(gateway.url + path, data=b"\x8b\x00opaque", headers=headers) as r:
            assert r.status in (403, 415) and r.status != 200
    assert gateway.fake.received == []
