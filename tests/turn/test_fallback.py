"""Fallbacks: a model that fails before anything was relayed hands the turn to the next of its
`fallbacks`, through that model's own route, with the context re-fitted to its window."""

from __future__ import annotations

import dataclasses
from typing import Any

import aiohttp
import openai
import pytest

from proxy.config import Settings, settings_from_mapping
from tests.conftest import Proxy, ProxyFactory, make_settings, replace_context
from tests.fake_upstream import MODELS, FakeOpenAI


def with_fallbacks(settings: Settings, **fallbacks: tuple[str, ...]) -> Settings:
    models = dict(settings.context.models)
    for model, chain in fallbacks.items():
        models[model.replace("_", "-")] = dataclasses.replace(models[model.replace("_", "-")], fallbacks=chain)
    return replace_context(settings, models=models)


def long_turn(n: int) -> str:
    return f"turn {n}: " + " ".join(f"detail{n}-{k} of the plan is {k * n % 89}" for k in range(90))


async def journal(proxy: Proxy, session: str) -> Any:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{proxy.url}/v1/sessions/{session}", headers={"Authorization": "Bearer sk-test"}) as r,
    ):
        return await r.json()


async def test_a_down_model_falls_back_to_a_smaller_window_with_a_compacted_context(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="summarize")  # type: ignore[attr-defined]
    proxy = await start_proxy(with_fallbacks(settings, gpt_4o=("small-model",)))
    client = proxy.client(default_headers={"X-Session-Id": "fb"})
    turns = 14
    for n in range(turns):
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": long_turn(n)}])
    history_tokens = fake.prompt_tokens(fake.chats[-1]["messages"])
    window = MODELS["small-model"]
    assert history_tokens > window, "the session's history no longer fits the fallback's window"

    fake.failing["gpt-4o"] = 503
    answer = await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "and now?"}])
    assert answer.model == "small-model" and answer.choices[0].message.content
    sent = fake.chats[-1]
    fallback_tokens = fake.prompt_tokens(sent["messages"])
    print(f"fallback prompt: {fallback_tokens} tokens for a window of {window} (history was {history_tokens})")
    assert sent["model"] == "small-model" and fallback_tokens <= window
    assert sent["messages"][-1] == {"role": "user", "content": "and now?"}
    assert fake.summaries and all(s["model"] == "small-model" for s in fake.summaries), "compressed by the fallback"

    session = await journal(proxy, "fb")
    assert len(session["turns"]) == turns + 1 and all(t["status"] == "completed" for t in session["turns"])
    assert [t["model"] for t in session["turns"]][-2:] == ["gpt-4o", "small-model"]
    assert [t["input"][0]["content"] for t in session["turns"]][:turns] == [long_turn(n) for n in range(turns)]

    del fake.failing["gpt-4o"]
    await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "back again"}])
    assert fake.chats[-1]["model"] == "gpt-4o", "later turns go back to the requested model"
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/metrics") as r:
        assert 'context_proxy_fallbacks_total{model="gpt-4o",fallback="small-model",reason="503"} 1' in await r.text()


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unreachable_route_or_a_429_falls_back_in_order_through_each_route(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str, stream: bool
) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    routes = settings_from_mapping({"routes": [{"models": ["gpt-4o"], "base_url": "http://127.0.0.1:9/v1"}]}).routes
    settings = dataclasses.replace(with_fallbacks(settings, gpt_4o=("tiny-model", "gpt-4o-mini")), routes=routes)
    proxy = await start_proxy(settings)
    fake.failing["tiny-model"] = 429
    client = proxy.client(default_headers={"X-Session-Id": f"fb-{stream}"})
    messages = [{"role": "user", "content": "hello"}]
    if stream:
        chunks = [c async for c in await client.chat.completions.create(model="gpt-4o", messages=messages, stream=True)]
        assert {c.model for c in chunks} == {"gpt-4o-mini"}
    else:
        assert (await client.chat.completions.create(model="gpt-4o", messages=messages)).model == "gpt-4o-mini"
    assert [c["model"] for c in fake.chats] == ["tiny-model", "gpt-4o-mini"]
    session = await journal(proxy, f"fb-{stream}")
    assert [t["model"] for t in session["turns"]] == ["gpt-4o-mini"]


async def test_no_fallback_for_other_client_errors_nor_when_every_fallback_fails(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    proxy = await start_proxy(
        with_fallbacks(settings, gpt_4o=("tiny-model", "gpt-4o-mini"), small_model=("gpt-4o-mini",))
    )
    client = proxy.client()
    with pytest.raises(openai.BadRequestError) as info:  # too long for small-model: a 400, not a failure
        await client.chat.completions.create(
            model="small-model", messages=[{"role": "user", "content": "x"}], max_tokens=9000
        )
    assert info.value.code != "rate_limit_exceeded"
    assert {c["model"] for c in fake.chats} <= {"small-model"}
    fake.failing["gpt-4o"] = 500
    answer = await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "long answer"}], max_tokens=4000
    )
    assert answer.model == "gpt-4o-mini", "tiny-model's window cannot hold max_tokens: skipped"
    fake.failing.update({"tiny-model": 502, "gpt-4o-mini": 503})
    with pytest.raises(openai.InternalServerError) as failed:
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "anyone?"}])
    assert failed.value.status_code == 503, "the last fallback's answer reaches the client unchanged"
