"""Routes by model glob: managed and passed-through calls go to the first matching route, with its key."""

from __future__ import annotations

import pytest

from tests.conftest import ProxyFactory
from tests.fake_upstream import FakeOpenAI
from tests.gateway.conftest import ALICE, call, gateway_settings

ROUTES = [
    {"models": ["tiny-llama*", "local-*"], "base_url": "", "api_key": "sk-local"},
    {"models": ["*"], "base_url": "http://127.0.0.1:9/v1"},  # never reached: the first match wins
]


@pytest.mark.parametrize("gateway_keys", [True, False], ids=["gateway", "own-keys"])
async def test_requests_go_to_the_first_route_whose_glob_matches(
    start_proxy: ProxyFactory, fake: FakeOpenAI, second_fake: FakeOpenAI, flushed_redis: str, gateway_keys: bool
) -> None:
    routes = [{**ROUTES[0], "base_url": second_fake.url}]  # type: ignore[attr-defined]
    settings = gateway_settings(flushed_redis, fake.url, keys=None if gateway_keys else [], routes=routes)  # type: ignore[attr-defined]
    proxy = await start_proxy(settings)
    client = proxy.client(ALICE, default_headers={"X-Session-Id": "routed"})
    await client.chat.completions.create(model="tiny-llama", messages=[{"role": "user", "content": "local one"}])
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "cloud one"}])
    stream = await client.chat.completions.create(
        model="tiny-llama", messages=[{"role": "user", "content": "local two"}], stream=True
    )
    assert [chunk async for chunk in stream]
    await client.embeddings.create(model="local-embed", input="x")
    await client.embeddings.create(model="text-embedding-3-small", input="x")
    await client.models.list()

    assert [c["model"] for c in second_fake.chats] == ["tiny-llama", "tiny-llama"]
    assert [c["model"] for c in fake.chats] == ["gpt-4o-mini"]
    assert len(second_fake.other_headers) == 1 and len(fake.other_headers) == 2, (
        "embeddings by model, models to upstream"
    )
    local_key = "Bearer sk-local" if gateway_keys else f"Bearer {ALICE}"
    cloud_key = "Bearer sk-default" if gateway_keys else f"Bearer {ALICE}"
    assert {h["Authorization"] for h in second_fake.headers + second_fake.other_headers} == {local_key}
    assert {h["Authorization"] for h in fake.headers + fake.other_headers} == {cloud_key}
    # one session across both upstreams: the second local turn saw the whole conversation
    assert [m["content"] for m in second_fake.chats[-1]["messages"] if m["role"] == "user"] == [
        "local one", "cloud one", "local two",
    ]  # fmt: skip


async def test_a_json_body_without_a_model_goes_to_upstream(
    start_proxy: ProxyFactory, fake: FakeOpenAI, second_fake: FakeOpenAI, flushed_redis: str
) -> None:
    routes = [{"models": ["*"], "base_url": second_fake.url}]  # type: ignore[attr-defined]
    proxy = await start_proxy(gateway_settings(flushed_redis, fake.url, routes=routes))  # type: ignore[attr-defined]
    status, body, _ = await call("POST", proxy.url + "/v1/echo/files", key=ALICE, json={"purpose": "batch"})
    assert status == 200 and body["body"] == '{"purpose": "batch"}' and body["authorization"] == "Bearer sk-default"
    assert len(fake.other_headers) == 1 and second_fake.other_headers == []
