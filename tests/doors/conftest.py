"""What the door tests share: a fake Anthropic upstream per test (`tests/fake_anthropic.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestServer

from tests.fake_anthropic import FakeAnthropic


@pytest.fixture
async def fake_claude(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> FakeAnthropic:
    fake = FakeAnthropic()
    server = await aiohttp_server(fake.app())
    fake.url = str(server.make_url("/v1"))  # type: ignore[attr-defined]
    return fake
