"""june's statuses: a turn the caller aborted is `canceled`, one cut off by something else
`interrupted`, one the upstream refused or broke `failed`; only `completed` turns are context."""

from __future__ import annotations

import contextlib
import dataclasses

import openai

from proxy.errors import UpstreamTimeout, UpstreamUnavailable
from proxy.turn.status import cut_off, ended_by
from tests.conftest import ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI
from tests.handlers.test_sessions import session_json


def test_status_names() -> None:
    assert ended_by(UpstreamTimeout("stalled")) == "interrupted"
    assert ended_by(UpstreamUnavailable("cut")) == "failed"
    assert cut_off(stopping=False) == "canceled" and cut_off(stopping=True) == "interrupted"


async def test_an_upstream_that_stalls_mid_stream_interrupts_the_turn(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    proxy = await start_proxy(
        dataclasses.replace(settings, upstream=dataclasses.replace(settings.upstream, timeout_s=1))
    )
    client = proxy.client(default_headers={"X-Session-Id": "stalled"})
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "before"}])
    fake.chunk_delay_s = 0.4
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "a long story " * 20}], stream=True
    )
    with contextlib.suppress(openai.APIError):  # the stream ends early (with an error event, or none)
        chunks = [chunk async for chunk in stream]
        assert not chunks or chunks[-1].choices[0].finish_reason is None
    fake.chunk_delay_s = 0
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "after"}])
    _, journal = await session_json(proxy, "stalled")
    assert [t["status"] for t in journal["turns"]] == ["completed", "interrupted", "completed"]
    assert journal["turns"][1]["error"]["status"] == 504
    sent = [m["content"] for m in fake.chats[-1]["messages"] if m["role"] == "user"]
    assert sent == ["before", "after"], "only completed turns reach a later context"
