"""The Responses API end to end, with the official openai SDK, over the fake Chat Completions upstream."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from aiohttp import web

import tests.conftest
from proxy.app import create_app
from proxy.config import Settings
from proxy.handlers import responses
from tests.conftest import Proxy, ProxyFactory


def _with_responses(settings: Settings) -> web.Application:
    """The app as `create_app` builds it, with the Responses routes until `create_app` adds them itself."""
    app = create_app(settings)
    if not any(r.canonical == responses.RESPONSES_PATH for r in app.router.resources()):
        responses.add_routes(app)
    return app


@pytest.fixture
async def proxy(start_proxy: ProxyFactory, monkeypatch: pytest.MonkeyPatch) -> Proxy:
    monkeypatch.setattr(tests.conftest, "create_app", _with_responses)
    return await start_proxy(strategy="full")


def _chat(proxy: Proxy, index: int = -1) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = proxy.fake.chats[index]["messages"]
    return messages


async def test_string_input_answers_with_output_text(proxy: Proxy) -> None:
    response = await proxy.client().responses.create(model="gpt-4o-mini", input="Hi there")
    assert response.id.startswith("resp_") and response.status == "completed"
    assert "Hi there" in response.output_text
    assert response.usage is not None and response.usage.input_tokens > 0
    assert _chat(proxy) == [{"role": "user", "content": "Hi there"}]
