"""The session's compaction claim: one summarizer call per compaction, and never a request over the window."""

from __future__ import annotations

import openai
import pytest

from proxy.keys import STORE
from proxy.sessions import tenant_of
from proxy.store import SessionKeys
from tests.conftest import Proxy, ProxyFactory
from tests.handlers.test_overflow import filler

WINDOW = 3000  # tiny-model
TRIGGER = 2100  # 0.7 of it


async def grow(proxy: Proxy, session: str, until: int) -> int:
    """Turns on `session` (strategy full: nothing compacts) until the last prompt passed `until` tokens."""
    client = proxy.client(default_headers={"X-Session-Id": session, "X-Context-Strategy": "full"})
    sent, n = 0, 0
    while sent < until:
        raw = await client.chat.completions.with_raw_response.create(
            model="tiny-model", messages=[{"role": "user", "content": filler(n) + " " + filler(n + 1000)}]
        )
        sent, n = int(raw.headers["X-Context-Tokens"]), n + 1
    return sent


async def held_elsewhere(proxy: Proxy, session: str) -> None:
    """Another replica holds the session's compaction claim (and keeps it past the wait)."""
    keys = SessionKeys(tenant_of("Bearer sk-test", ""), session)
    assert await proxy.app[STORE].acquire_lock(keys.compaction_lock, "another-replica", 30)


async def test_a_request_that_cannot_get_the_claim_in_time_goes_as_it_is_when_that_fits(
    start_proxy: ProxyFactory,
) -> None:
    proxy = await start_proxy(strategy="summarize", compression_timeout_s=0.3)
    await grow(proxy, "busy", TRIGGER + 100)
    await held_elsewhere(proxy, "busy")
    client = proxy.client(default_headers={"X-Session-Id": "busy"})
    raw = await client.chat.completions.with_raw_response.create(
        model="tiny-model", messages=[{"role": "user", "content": "short"}]
    )
    assert raw.headers["X-Context-Window-Id"] == "win_0", "nothing was compacted: another holds the claim"
    assert proxy.fake.summaries == []
    assert TRIGGER < proxy.fake.prompt_tokens(proxy.fake.chats[-1]["messages"]) <= WINDOW


async def test_a_request_that_cannot_get_the_claim_in_time_and_does_not_fit_is_refused(
    start_proxy: ProxyFactory,
) -> None:
    proxy = await start_proxy(strategy="summarize", compression_timeout_s=0.3)
    await grow(proxy, "full-up", TRIGGER + 100)
    await held_elsewhere(proxy, "full-up")
    client = proxy.client(default_headers={"X-Session-Id": "full-up"})
    upstream_before = len(proxy.fake.received)
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": "word " * 900}])
    assert info.value.body["code"] == "context_length_exceeded"  # type: ignore[index]
    assert "X-Fake-Upstream" not in info.value.response.headers, "the proxy refused it; it never went upstream"
    assert len(proxy.fake.received) == upstream_before
