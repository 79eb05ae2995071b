"""Everything else under /v1: method, query, headers and body go as they are; answers come back unchanged."""

from __future__ import annotations

import aiohttp

from tests.conftest import Proxy


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
        "method": "PUT", "path": "/v1/echo/files", "query": {"purpose": "batch", "status": "201"},
        "size": 3_000_000, "authorization": "Bearer sk-own", "body": "x" * 200,
    }  # fmt: skip


async def test_client_without_key_gets_the_configured_one(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/v1/echo/anything") as r:
        assert (await r.json())["authorization"] == "Bearer sk-default"


async def test_upstream_error_status_and_body_pass_through(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.delete(proxy.url + "/s/some-session/v1/echo/x?status=418") as r:
            assert r.status == 418
            assert (await r.json())["path"] == "/v1/echo/x"
