"""The error middleware: domain errors in OpenAI's shape; a failure after the response started
drops the connection instead of pretending to answer 500."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from proxy.context.budget import ContextTooLarge
from proxy.handlers.middleware import error_middleware
from proxy.handlers.relay import start_stream


async def _started_then_broken(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await start_stream(request, response)
    await response.write(b"data: {}\n\n")
    raise RuntimeError("a bug after the headers went out")


async def _too_large(request: web.Request) -> web.StreamResponse:
    raise ContextTooLarge("even after compaction the messages need 9 tokens")


async def _bug(request: web.Request) -> web.StreamResponse:
    raise RuntimeError("a bug before anything was sent")


@pytest.fixture
async def client(aiohttp_client: Callable[[web.Application], Awaitable[TestClient]]) -> TestClient:
    app = web.Application(middlewares=[error_middleware])
    app.router.add_get("/started", _started_then_broken)
    app.router.add_get("/too-large", _too_large)
    app.router.add_get("/bug", _bug)
    return await aiohttp_client(app)


async def test_a_failure_after_the_response_started_drops_the_connection(client: TestClient) -> None:
    response = await client.get("/started")
    assert response.status == 200, "the headers had gone out; no 500 can follow them"
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.read()


async def test_domain_errors_become_openai_errors(client: TestClient) -> None:
    response = await client.get("/too-large")
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"


async def test_a_bug_before_the_response_is_a_500_in_openai_shape(client: TestClient) -> None:
    response = await client.get("/bug")
    assert response.status == 500
    assert (await response.json())["error"]["type"] == "server_error"
