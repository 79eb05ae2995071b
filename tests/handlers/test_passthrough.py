"""Everything else under /v1: method, query, headers and body go as they are; answers come back unchanged."""

from __future__ import annotations

import dataclasses
import gzip
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest
import yarl
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.config import Settings, settings_from_mapping
from tests.conftest import SHUTDOWN_TIMEOUT_S, Proxy, ProxyFactory, make_settings
from tests.fake_upstream import MARK, FakeOpenAI


async def test_method_query_body_and_status_pass_through(proxy: Proxy) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.put(
            proxy.url + "/v1/echo/files?purpose=batch&status=201",
            data=b"x" * 3_000_000,
            headers={"Authorization": "Bearer sk-own"},
        ) as r,
    ):
        assert r.status == 201 and r.headers["X-Echo"] == "1"
        body = await r.json()
    assert body == {
        "method": "PUT", "path": "/v1/echo/files", "raw_path": "/v1/echo/files?purpose=batch&status=201",
        "query": {"purpose": "batch", "status": "201"},
        "size": 3_000_000, "authorization": "Bearer sk-own", "body": "x" * 200,
    }  # fmt: skip


@pytest.mark.parametrize("prefix", ["", "/s/v1"])
async def test_the_path_and_query_go_up_encoded_as_the_client_sent_them(proxy: Proxy, prefix: str) -> None:
    """Escapes stay escapes (a space, a slash inside a segment, a plus); a session prefix is dropped."""
    async with aiohttp.ClientSession() as http:
        url = yarl.URL(proxy.url + prefix + "/v1/echo/files/a%20b%2Fc%C3%A9?x=%2B1&y=a+b", encoded=True)
        async with http.get(url, headers={"Authorization": "Bearer sk-own"}) as r:
            body = await r.json()
    assert body["raw_path"] == "/v1/echo/files/a%20b%2Fc%C3%A9?x=%2B1&y=a+b"
    assert body["query"] == {"x": "+1", "y": "a b"}


async def test_client_without_key_gets_the_configured_one(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/v1/echo/anything") as r:
        assert (await r.json())["authorization"] == "Bearer sk-default"


async def test_upstream_error_status_and_body_pass_through(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http, http.delete(proxy.url + "/s/some-session/v1/echo/x?status=418") as r:
        assert r.status == 418
        assert (await r.json())["path"] == "/v1/echo/x"


@dataclass
class Recorder:
    """An upstream that reads bodies as they arrive (no decompression): what reached it, as it came."""

    url: str = ""
    seen: list[tuple[str | None, bytes]] = field(default_factory=list)

    async def record(self, request: web.Request) -> web.Response:
        self.seen.append((request.headers.get("Content-Encoding"), await request.read()))
        return web.json_response({"recorded": len(self.seen)}, headers={MARK: "1"})


@pytest.fixture
async def recorder(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> Recorder:
    recorder = Recorder()
    app = web.Application(handler_args={"auto_decompress": False})
    app.router.add_route("*", "/v1/{tail:.*}", recorder.record)
    recorder.url = str((await aiohttp_server(app, shutdown_timeout=SHUTDOWN_TIMEOUT_S)).make_url("/v1"))
    return recorder


async def _post(proxy: Proxy, path: str, data: bytes, encoding: str) -> tuple[int, Any, str | None]:
    headers = {"Authorization": "Bearer sk-own", "Content-Type": "application/json", "Content-Encoding": encoding}
    async with (
        aiohttp.ClientSession(auto_decompress=False) as http,
        http.post(proxy.url + path, data=data, headers=headers) as r,
    ):
        return r.status, orjson.loads(await r.read()), r.headers.get(MARK)


ZSTD_FRAME = b"\x28\xb5\x2f\xfd" + b'{"model": "local-embed", "input": "x"}'  # a zstd magic number, then anything


@pytest.mark.parametrize("encoding", ["zstd", "br", "snappy", "gzip", "gzip, zstd"])
@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1//chat/completions", "/s/sid/v1/files"])
async def test_a_body_in_any_encoding_goes_up_untouched(
    start_proxy: ProxyFactory, recorder: Recorder, flushed_redis: str, encoding: str, path: str
) -> None:
    """The upstream judges an encoding the proxy does not read (one that reads zstd gets zstd)."""
    proxy = await start_proxy(make_settings(flushed_redis, recorder.url, strategy="full"))
    status, body, mark = await _post(proxy, path, ZSTD_FRAME, encoding)
    assert (status, body, mark) == (200, {"recorded": 1}, "1")
    assert recorder.seen == [(encoding, ZSTD_FRAME)]


@pytest.mark.parametrize(
    ("encoding", "data", "status", "code"),
    [
        ("zstd", ZSTD_FRAME, 415, "unsupported_content_encoding"),
        ("gzip, br", ZSTD_FRAME, 415, "unsupported_content_encoding"),
        ("gzip", ZSTD_FRAME, 400, "invalid_content_encoding"),
    ],
    ids=["zstd", "stacked", "not-gzip"],
)
async def test_with_routes_a_body_whose_encoding_hides_its_model_is_refused(
    start_proxy: ProxyFactory,
    recorder: Recorder,
    flushed_redis: str,
    encoding: str,
    data: bytes,
    status: int,
    code: str,
) -> None:
    """Its model may belong to another route: it is not sent to the default upstream with that upstream's key."""
    proxy = await start_proxy(_routed(flushed_redis, recorder.url))
    answer, body, mark = await _post(proxy, "/v1/embeddings", data, encoding)
    assert (answer, mark) == (status, None)
    assert body["error"]["code"] == code and set(body["error"]) == {"message", "type", "param", "code"}
    assert recorder.seen == []


async def test_with_routes_a_readable_body_is_routed_by_its_model(
    start_proxy: ProxyFactory, recorder: Recorder, fake: FakeOpenAI, flushed_redis: str
) -> None:
    proxy = await start_proxy(_routed(flushed_redis, fake.url, route_url=recorder.url))  # type: ignore[attr-defined]
    packed = gzip.compress(b'{"model": "local-embed", "input": "x"}')
    assert (await _post(proxy, "/v1/embeddings", packed, "gzip"))[0] == 200
    assert recorder.seen == [("gzip", packed)], "the routed upstream gets the body as it came"
    unnamed = gzip.compress(b'{"input": "no model"}')
    assert (await _post(proxy, "/v1/echo/x", unnamed, "gzip"))[0] == 200, "no model: the default upstream"
    assert len(recorder.seen) == 1


def _routed(redis_url: str, upstream_url: str, *, route_url: str = "http://127.0.0.1:9/v1") -> Settings:
    routes = settings_from_mapping({"routes": [{"models": ["local-*"], "base_url": route_url}]}).routes
    return dataclasses.replace(make_settings(redis_url, upstream_url, strategy="full"), routes=routes)
