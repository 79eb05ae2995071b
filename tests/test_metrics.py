"""`/metrics`: standard exposition text that no client can corrupt or blow up.

Hostile model names are escaped (the output parses with `prometheus_client`'s parser
and passes `promtool check metrics`, skipped where promtool is absent), unknown models
fold into `other`, and the operator's series are there: tokens, compactions with their
latency, upstream answers by class, Redis errors, path-cache hits, process figures.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import aiohttp
import openai
import pytest

from proxy.events import CompactionFailed, CompactionLanded
from proxy.metrics import Metrics, escape
from proxy.store import EmbeddedRedis
from tests.conftest import Proxy, ProxyFactory, make_settings, replace_context
from tests.exposition import promtool_check as _promtool
from tests.exposition import samples as _samples
from tests.fake_upstream import FakeOpenAI

HOSTILE = ["back\\slash", 'quo"te', "new\nline", 'x"} 1\nforged_total{a="b', "trailing\\"]


async def _scrape(proxy: Proxy) -> str:
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/metrics") as response:
        assert response.status == 200
        return await response.text()


def test_label_values_are_escaped_as_the_format_says() -> None:
    assert escape('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


@pytest.fixture
async def hostile(start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str) -> Proxy:
    """A proxy whose configured models include names that would break a naive exposition."""
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    models = {**settings.context.models, **{name: settings.context.for_model("gpt-4o-mini") for name in HOSTILE}}
    return await start_proxy(replace_context(settings, models=models))


async def test_hostile_model_names_neither_break_nor_forge_series(hostile: Proxy) -> None:
    client = hostile.client()
    for name in HOSTILE:
        with pytest.raises(openai.NotFoundError):  # the fake upstream knows no such model
            await client.chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}])
    text = await _scrape(hostile)
    samples = _samples(text)
    models = {dict(labels).get("model") for name, labels in samples if name == "context_proxy_requests_total"}
    assert set(HOSTILE) <= models, "every name reads back exactly as it was sent"
    assert not any(name.startswith("forged") for name, _ in samples)
    _promtool(text)


async def test_random_models_add_a_handful_of_series(proxy: Proxy) -> None:
    """Through the proxy (100 names here; `CONTEXT_PROXY_METRICS_NAMES=1000` runs more)."""
    client = proxy.client()
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "warm"}])
    await _scrape(proxy)  # the scrape's own series exist from here on
    before = len(_samples(await _scrape(proxy)))

    async def one() -> None:
        name = f"m-{uuid.uuid4().hex}"
        with pytest.raises(openai.NotFoundError):
            await client.chat.completions.create(model=name, messages=[{"role": "user", "content": name}])

    names = int(os.environ.get("CONTEXT_PROXY_METRICS_NAMES", "100"))
    for start in range(0, names, 50):
        await asyncio.gather(*(one() for _ in range(min(50, names - start))))
    after = _samples(await _scrape(proxy))
    assert len(after) - before <= 5
    requests = "context_proxy_requests_total"
    assert sum(v for (name, labels), v in after.items() if name == requests and ("model", "other") in labels) == names


def test_a_thousand_models_and_strategies_stay_bounded() -> None:
    metrics = Metrics(["gpt-4o-mini"])
    metrics.request_done("/v1/chat/completions", "gpt-4o-mini", 200, 0.01)
    for i in range(1000):
        metrics.request_done("/v1/chat/completions", f"model-{i}", 200, 0.01)
        metrics.tokens(f"model-{i}", prompt=1, completion=1)
        metrics.observe(CompactionFailed("s", "r", f"strategy-{i}", "x", 1, 0.1))
    after = _samples(metrics.render())
    tokens = ("context_proxy_prompt_tokens_total", (("model", "other"),))
    assert after[tokens] == 1000
    models = {dict(labels).get("model") for name, labels in after if name == "context_proxy_requests_total"}
    assert models == {"gpt-4o-mini", "other"}
    strategies = {dict(labels)["strategy"] for name, labels in after if name == "context_proxy_compactions_total"}
    assert len(strategies) == 33 and "other" in strategies  # the first 32 names, then other


async def test_tokens_upstream_classes_cache_and_process_series(proxy: Proxy) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "counted"})
    first = await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "one"}])
    second = await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "two"}])
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "fail 429"}])
    text = await _scrape(proxy)
    samples = _samples(text)
    model = (("model", "gpt-4o-mini"),)
    assert first.usage and second.usage
    assert (
        samples[("context_proxy_prompt_tokens_total", model)] == first.usage.prompt_tokens + second.usage.prompt_tokens
    )
    assert samples[("context_proxy_completion_tokens_total", model)] == (
        first.usage.completion_tokens + second.usage.completion_tokens
    )
    assert samples[("context_proxy_upstream_responses_total", (("class", "2xx"),))] == 2
    assert samples[("context_proxy_upstream_responses_total", (("class", "4xx"),))] == 1
    assert samples[("context_proxy_path_cache_hits_total", ())] >= 1
    assert samples[("context_proxy_path_cache_misses_total", ())] >= 1
    assert samples[("process_resident_memory_bytes", ())] > 1e6
    assert samples[("process_open_fds", ())] > 0
    assert samples[("process_cpu_seconds_total", ())] > 0
    _promtool(text)


def test_compactions_count_outcomes_with_a_latency_histogram() -> None:
    metrics = Metrics()
    landed = CompactionLanded("s", "req", "summarize", "win_0", "win_1", (1,), (2,), "a", None, None, None, 0.3)
    metrics.observe(landed)
    metrics.observe(CompactionFailed("s", "req", "summarize", "timeout", 1, 2.0))
    samples = _samples(metrics.render())
    assert samples[("context_proxy_compactions_total", (("outcome", "landed"), ("strategy", "summarize")))] == 1
    assert samples[("context_proxy_compactions_total", (("outcome", "failed"), ("strategy", "summarize")))] == 1
    assert samples[("context_proxy_compaction_seconds_count", (("strategy", "summarize"),))] == 2
    assert samples[("context_proxy_compaction_seconds_bucket", (("le", "0.5"), ("strategy", "summarize")))] == 1
    _promtool(metrics.render())


async def test_redis_errors_are_counted(start_proxy: ProxyFactory, fake: FakeOpenAI, tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path)
    proxy = await start_proxy(make_settings(await server.start(), fake.url))  # type: ignore[attr-defined]
    await server.stop()
    with pytest.raises(openai.APIStatusError):
        await proxy.client().chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert _samples(await _scrape(proxy))[("context_proxy_redis_errors_total", ())] == 1
