"""Headers across a managed turn: what goes upstream of the client's, what comes back of the upstream's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict, CIMultiDictProxy

from tests.conftest import SHUTDOWN_TIMEOUT_S, ProxyFactory, make_settings

COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13},
}  # fmt: skip


@dataclass
class Upstream:
    """Answers every chat request with `COMPLETION` and an API's sort of headers; keeps what it was sent."""

    url: str = ""
    seen: list[CIMultiDictProxy[str]] = field(default_factory=list)

    async def chat(self, request: web.Request) -> web.Response:
        self.seen.append(request.headers)
        headers = CIMultiDict([
            ("x-ratelimit-remaining-requests", "9999"), ("openai-processing-ms", "412"),
            ("Set-Cookie", "a=1; path=/"), ("Set-Cookie", "b=2; path=/"), ("Keep-Alive", "timeout=5"),
            ("X-Request-Id", "req_upstream"),
        ])  # fmt: skip
        return web.Response(body=orjson.dumps(COMPLETION), content_type="application/json", headers=headers)


@pytest.fixture
async def upstream(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> Upstream:
    upstream = Upstream()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", upstream.chat)
    upstream.url = str((await aiohttp_server(app, shutdown_timeout=SHUTDOWN_TIMEOUT_S)).make_url("/v1"))
    return upstream


async def test_headers_each_way_keep_their_repeats_and_drop_hop_by_hop_and_the_proxys_own(
    start_proxy: ProxyFactory, upstream: Upstream, flushed_redis: str
) -> None:
    proxy = await start_proxy(make_settings(flushed_redis, upstream.url))
    sent = CIMultiDict([
        ("Authorization", "Bearer sk-own"), ("X-Session-Id", "relay-headers"), ("X-Context-Strategy", "full"),
        ("X-Stainless-Lang", "python"), ("X-Tag", "one"), ("X-Tag", "two"), ("Keep-Alive", "timeout=9"),
    ])  # fmt: skip
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.url + "/v1/chat/completions", json=body, headers=sent) as r,
    ):
        assert r.status == 200, await r.text()
        assert (await r.json())["choices"][0]["message"]["content"] == "hi"
        answered = r.headers

    assert answered.getall("Set-Cookie") == ["a=1; path=/", "b=2; path=/"]
    assert answered["x-ratelimit-remaining-requests"] == "9999" and answered["openai-processing-ms"] == "412"
    assert "Keep-Alive" not in answered
    assert answered.getall("X-Request-Id") != ["req_upstream"]  # the proxy's own id replaces the upstream's
    assert len(answered.getall("X-Request-Id")) == 1 and answered["X-Session-Id"] == "relay-headers"

    [up] = upstream.seen
    assert up["Authorization"] == "Bearer sk-own" and up["X-Stainless-Lang"] == "python"
    assert up.getall("X-Tag") == ["one", "two"]
    assert not {"X-Session-Id", "X-Context-Strategy", "Keep-Alive"} & set(up.keys())
    assert up["Accept-Encoding"] == "identity" and up["Content-Type"] == "application/json"
