"""`POST /v1/messages/count_tokens` counts what the proxy would send: the session's context plus the
request's new input, reconciled, whether the client sends the whole history or only its new message."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic

from tests.conftest import Proxy, ProxyFactory

MODEL = "gpt-4o-mini"


def claude(proxy: Proxy, **headers: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=proxy.url, api_key="sk-test", max_retries=0, default_headers=headers)


async def converse(client: anthropic.AsyncAnthropic, turns: int, model: str = MODEL, words: int = 20) -> list[Any]:
    history: list[dict[str, Any]] = []
    for n in range(turns):
        history.append({"role": "user", "content": f"question {n}: " + " ".join(f"w{n}-{k}" for k in range(words))})
        message = await client.messages.create(model=model, max_tokens=100, system="Be brief.", messages=history)  # type: ignore[arg-type]
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
    return history


async def count(client: anthropic.AsyncAnthropic, messages: list[Any], model: str = MODEL) -> int:
    counted = await client.messages.count_tokens(model=model, system="Be brief.", messages=messages)
    return counted.input_tokens


async def test_a_delta_request_counts_the_sessions_history_too(proxy: Proxy) -> None:
    client = claude(proxy, **{"X-Session-Id": "counted"})
    history = await converse(client, 3)
    new = {"role": "user", "content": "and the next one?"}
    alone = await count(claude(proxy), [new])
    delta = await count(client, [new])
    full = await count(client, [*history, new])
    assert delta == full > alone, "the history the proxy supplies is counted once, however the client sends it"


async def test_after_a_compaction_the_count_is_the_compacted_context(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize", split="recent-turns")
    client = claude(proxy)  # a full-history client without a session id: the proxy derives its session
    history = await converse(client, 8, model="tiny-model", words=120)
    assert proxy.fake.summaries, "the conversation outgrew tiny-model's window"
    new = {"role": "user", "content": "and now?"}
    managed = await count(client, [*history, new], model="tiny-model")
    as_sent = await count(claude(proxy, **{"X-Session-Id": "fresh"}), [*history, new], model="tiny-model")
    assert managed < as_sent * 0.7 and managed < 3000
    assert await sessions(proxy) == 1, "counting made no session"


async def sessions(proxy: Proxy) -> int:
    async with (
        aiohttp.ClientSession(headers={"x-api-key": "sk-test"}) as http,
        http.get(proxy.url + "/v1/sessions") as answer,
    ):
        return len((await answer.json())["data"])
