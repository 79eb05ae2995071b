"""The savings figures (`proxy/turn/savings.py`): each turn's prompt as its client sent it, by the
tokenizer the proxy counts with, beside what went upstream; in the journal, the session API,
the access line and /metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from proxy.app_state import GATEWAY, SETTINGS
from proxy.cli import main
from proxy.config import PriceSettings, Settings, settings_from_mapping
from tests.conftest import Proxy, ProxyFactory, make_settings, replace_context
from tests.exposition import samples
from tests.fake_upstream import FakeOpenAI
from tests.handlers.test_overflow import SYSTEM, filler
from tests.handlers.test_sessions import session_json


async def _scrape(proxy: Proxy) -> dict[Any, float]:
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/metrics") as response:
        return samples(await response.text())


async def _listed(proxy: Proxy, session: str) -> dict[str, Any]:
    """The session's item in `GET /v1/sessions`."""
    headers = {"Authorization": "Bearer sk-test"}
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/v1/sessions", headers=headers) as response:
        (item,) = [s for s in (await response.json())["data"] if s["id"] == session]
        return item  # type: ignore[no-any-return]


async def _chat(
    proxy: Proxy, session: str, turns: int, *, full_history: bool, model: str = "tiny-model", key: str = "sk-test"
) -> list[int]:
    """Run a conversation; the client's own prompt of each turn, as the fake upstream counts it."""
    client = proxy.client(key, default_headers={"X-Session-Id": session})
    history: list[dict[str, Any]] = [SYSTEM]
    sent = []
    for n in range(turns):
        user = {"role": "user", "content": filler(n)}
        messages = [*history, user] if full_history else ([SYSTEM, user] if n == 0 else [user])
        sent.append(proxy.fake.prompt_tokens(messages))
        answer = await client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
        history += [user, {"role": "assistant", "content": answer.choices[0].message.content}]
    return sent


async def test_a_full_history_client_under_full_saves_nothing_and_counts_what_it_sent(proxy: Proxy) -> None:
    client_prompts = await _chat(proxy, "whole", 6, full_history=True, model="gpt-4o-mini")
    _, journal = await session_json(proxy, "whole")
    turns = journal["turns"]
    assert [t["client_tokens"] for t in turns] == client_prompts
    assert [t["context_tokens"] for t in turns] == client_prompts, "`full` sends what the client sent"
    assert [t["saved_tokens"] for t in turns] == [0] * 6
    totals = journal["totals"]
    assert (totals["client_tokens"], totals["sent_tokens"], totals["saved_tokens"]) == (
        sum(client_prompts),
        sum(client_prompts),
        0,
    )


async def test_a_delta_client_is_supplied_its_history_as_negative_savings(proxy: Proxy) -> None:
    client_prompts = await _chat(proxy, "delta", 5, full_history=False, model="gpt-4o-mini")
    _, journal = await session_json(proxy, "delta")
    turns = journal["turns"]
    assert [t["client_tokens"] for t in turns] == client_prompts
    assert turns[0]["saved_tokens"] == 0
    assert all(t["saved_tokens"] < 0 for t in turns[1:]), "the proxy supplied the history"
    assert [t["context_tokens"] - t["client_tokens"] for t in turns] == [-t["saved_tokens"] for t in turns]


def priced(settings: Settings) -> Settings:
    """`tiny-model` at $1 in, $0.50 cached, $2 out per million tokens."""
    models = dict(settings.context.models)
    models["tiny-model"] = dataclasses.replace(models["tiny-model"], price=PRICE)
    return replace_context(settings, models=models)


PRICE = PriceSettings(input=1.0, cached_input=0.5, output=2.0)


async def test_under_summarize_the_client_count_survives_compactions_and_reaches_the_metrics(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    proxy = await start_proxy(priced(make_settings(flushed_redis, fake.url, strategy="summarize")))  # type: ignore[attr-defined]
    client_prompts = await _chat(proxy, "long", 40, full_history=True)
    assert proxy.fake.summaries, "the conversation was compacted"
    _, journal = await session_json(proxy, "long")
    turns = journal["turns"]
    assert [t["client_tokens"] for t in turns] == client_prompts, "counted from the journal, exactly"
    assert turns[-1]["saved_tokens"] > 0 and turns[-1]["context_tokens"] <= 3000
    for turn in turns:
        usage = turn["usage"]
        assert turn["cost_usd"] == pytest.approx((usage["prompt_tokens"] + 2 * usage["completion_tokens"]) / 1e6)
        assert turn["saved_cost_usd"] == pytest.approx(turn["saved_tokens"] / 1e6)
    totals = journal["totals"]
    assert totals["saved_tokens"] == sum(client_prompts) - totals["sent_tokens"] > 0
    assert totals["compactions"] == len(proxy.fake.summaries)
    summarized = [e["usage"] for e in journal["events"] if e.get("type") == "compaction"]
    summarizer_cost = sum(u["prompt_tokens"] + 2 * u["completion_tokens"] for u in summarized) / 1e6
    assert totals["summarizer_cost_usd"] == pytest.approx(summarizer_cost, abs=1e-6) and summarizer_cost > 0
    assert totals["summarizer_tokens"] == sum(u["total_tokens"] for u in summarized)
    listed = await _listed(proxy, "long")
    assert (listed["client_tokens"], listed["saved_tokens"]) == (totals["client_tokens"], totals["saved_tokens"])
    assert (listed["cost_usd"], listed["saved_cost_usd"]) == (totals["cost_usd"], totals["saved_cost_usd"])
    metrics = await _scrape(proxy)
    label = (("mode", "managed"), ("model", "tiny-model"))
    assert metrics[("context_proxy_client_prompt_tokens_total", label)] == sum(client_prompts)
    assert metrics[("context_proxy_saved_tokens_total", label)] == totals["saved_tokens"]
    assert metrics[("context_proxy_cost_usd_total", label)] == pytest.approx(sum(t["cost_usd"] for t in turns))
    assert metrics[("context_proxy_saved_cost_usd_total", label)] == pytest.approx(totals["saved_tokens"] / 1e6)


async def test_a_model_without_a_price_has_no_cost_figures(proxy: Proxy) -> None:
    await _chat(proxy, "unpriced", 2, full_history=True, model="tiny-model")
    _, journal = await session_json(proxy, "unpriced")
    assert [(t["cost_usd"], t["saved_cost_usd"]) for t in journal["turns"]] == [(None, None)] * 2
    assert journal["totals"]["cost_usd"] == 0


async def test_a_long_first_request_counts_its_imported_exchanges_and_the_next_turn_reuses_them(
    proxy: Proxy,
) -> None:
    client = proxy.client(default_headers={"X-Session-Id": "arrives-long"})
    history: list[dict[str, Any]] = [SYSTEM]
    for n in range(4):
        history += [{"role": "user", "content": filler(n)}, {"role": "assistant", "content": f"answer {n}"}]
    prompts = []
    for n in (4, 5):
        user = {"role": "user", "content": filler(n)}
        prompts.append(proxy.fake.prompt_tokens([*history, user]))
        answer = await client.chat.completions.create(model="gpt-4o-mini", messages=[*history, user])  # type: ignore[arg-type]
        history += [user, {"role": "assistant", "content": answer.choices[0].message.content}]
    _, journal = await session_json(proxy, "arrives-long")
    answered = [t for t in journal["turns"] if not t["imported"]]
    assert [t["client_tokens"] for t in answered] == prompts
    assert all(t["client_tokens"] is None for t in journal["turns"] if t["imported"])
    listed = await _listed(proxy, "arrives-long")
    assert listed["client_tokens"] == sum(prompts) and listed["saved_tokens"] == journal["totals"]["saved_tokens"]


async def test_a_trimming_client_is_counted_as_it_sent_its_window(proxy: Proxy) -> None:
    """Reconcile rule 3: a client that keeps its last four messages; its count is its window's."""
    client = proxy.client(default_headers={"X-Session-Id": "sliding"})
    history: list[dict[str, Any]] = []
    prompts = []
    for n in range(6):
        user = {"role": "user", "content": filler(n)}
        messages = [SYSTEM, *history[-4:], user]
        prompts.append(proxy.fake.prompt_tokens(messages))
        answer = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
        history += [user, {"role": "assistant", "content": answer.choices[0].message.content}]
    _, journal = await session_json(proxy, "sliding")
    assert len(journal["turns"]) == 6
    assert [t["client_tokens"] for t in journal["turns"]] == prompts
    assert journal["turns"][-1]["saved_tokens"] < 0, "the proxy recomposed the whole history"


async def test_the_access_line_the_gateway_key_series_and_its_periods_carry_the_figures(
    start_proxy: ProxyFactory,
    fake: FakeOpenAI,
    flushed_redis: str,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    gateway = settings_from_mapping({"gateway": {"keys": [{"name": "team", "key": "sk-gw-team"}]}}).gateway
    proxy = await start_proxy(dataclasses.replace(settings, gateway=gateway))
    caplog.set_level(logging.INFO)
    client_prompts = await _chat(proxy, "keyed", 3, full_history=False, model="gpt-4o-mini", key="sk-gw-team")
    lines = [r.msg for r in caplog.records if r.name == "context_proxy.access"]
    fields = [line.fields for line in lines if line.fields.get("client_tokens") is not None]  # type: ignore[attr-defined]
    assert [f["client_tokens"] for f in fields] == client_prompts
    assert all(float(f["cost_usd"]) > 0 for f in fields), "gpt-4o-mini is in the default price table"
    assert [f["saved_tokens"] for f in fields] == [f["client_tokens"] - f["tokens_sent"] for f in fields]
    metrics = await _scrape(proxy)
    key = (("key", "team"), ("mode", "managed"))
    assert metrics[("context_proxy_gateway_client_prompt_tokens_total", key)] == sum(client_prompts)
    assert metrics[("context_proxy_gateway_saved_tokens_total", key)] == sum(f["saved_tokens"] for f in fields)
    cost = metrics[("context_proxy_gateway_cost_usd_total", key)]
    assert cost == pytest.approx(sum(float(f["cost_usd"]) for f in fields), abs=1e-5)
    saved = sum(f["saved_tokens"] for f in fields)
    assert saved < 0, "a delta client: history supplied"
    (row,) = await proxy.app[GATEWAY].admin.list()
    for period in ("day", "month"):
        assert row["usage"][period]["saved_tokens"] == saved
        assert row["usage"][period]["saved_usd"] == pytest.approx(saved * 0.15 / 1e6), "at gpt-4o-mini's input price"
    config = tmp_path / "c.yaml"
    redis = proxy.app[SETTINGS].redis
    config.write_text(
        f"redis:\n  url: {redis.url}\n  cluster: {str(redis.cluster).lower()}\n"
        "gateway:\n  keys: [{name: team, key: sk-gw-team}]\n"
    )
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["--config", str(config), "keys", "list"]) == 0
    (line,) = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("team ")]
    assert int(line[-3]) == saved
