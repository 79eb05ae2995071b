"""Shadow mode (`proxy/turn/shadow.py`): the client's own messages go upstream, while the proxy
journals the turn and counts what managed mode would have sent, with no summarizer call."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from proxy.compaction.strategies import StrategyRegistry
from proxy.config import ContextSettings, Settings
from proxy.context.compose import build_history
from proxy.context.window import Window
from proxy.errors import BadRequest
from proxy.gateway.policy import new_policy
from proxy.turn.shadow import shadow_history, simulated
from tests.conftest import Proxy, ProxyFactory, make_settings, replace_context
from tests.context.factories import turn
from tests.fake_upstream import FakeOpenAI
from tests.gateway.conftest import gateway_settings
from tests.handlers.test_overflow import SYSTEM, filler
from tests.handlers.test_sessions import session_json
from tests.session_api.test_report import report

WINDOW = 4000


def test_the_simulated_window_keeps_the_turns_past_its_boundary_and_pinned_ones_under_its_summary() -> None:
    turns = [turn(i, f"u{i}") for i in range(6)]
    turns[1] = turn(1, {"role": "user", "content": "keep this", "pinned": True})
    loaded = build_history(Window(), turns)
    shadowed = shadow_history(loaded, {"boundary": 3, "summary_tokens": 25})
    assert [u.turns[0].seq for u in shadowed.units] == [1, 4, 5]
    assert shadowed.window.summary_tokens == 25 and shadowed.total == 25 + 3 * 20
    assert shadow_history(loaded, None) is loaded


def test_shadow_mode_simulates_a_background_strategy_s_inner_one() -> None:
    registry = StrategyRegistry(ContextSettings())
    inner = registry.build(("summarize",), "m")
    assert simulated(registry.build(("background(summarize)",), "m")).name == inner.name
    assert simulated(inner) is inner


def _settings(redis_url: str, upstream_url: str, mode: str) -> Settings:
    """gpt-4o-mini (default prices) at a 4,000-token window under `summarize`, in `mode`."""
    settings = make_settings(redis_url, upstream_url, strategy="summarize")
    models = dict(settings.context.models)
    models["gpt-4o-mini"] = dataclasses.replace(models["gpt-4o-mini"], context_window=WINDOW)
    return replace_context(settings, models=models, mode=mode)


async def _turn(proxy: Proxy, history: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    client = proxy.client(default_headers={"X-Session-Id": "shadowed"})
    messages = [*history, {"role": "user", "content": filler(n)}]
    answer = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
    return [*messages, {"role": "assistant", "content": answer.choices[0].message.content}]


async def test_sixty_shadow_turns_forward_the_client_s_messages_and_count_what_managed_mode_would_send(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proxy = await start_proxy(_settings(flushed_redis, fake.url, "shadow"))  # type: ignore[attr-defined]
    history: list[dict[str, Any]] = [SYSTEM]
    for n in range(60):
        history = await _turn(proxy, history, n)
        assert fake.chats[-1]["messages"] == history[:-1], "exactly what the client sent"
    assert fake.summaries == [], "no summarizer call"
    _, journal = await session_json(proxy, "shadowed")
    turns = journal["turns"]
    assert len(turns) == 60 and all(t["shadow"] for t in turns)
    assert journal["window"]["current"] == "win_0", "nothing landed"
    assert [t["context_tokens"] for t in turns] == [t["client_tokens"] for t in turns], "the client's prompt went"
    composed = [t["shadow"]["composed_tokens"] for t in turns]
    assert max(composed) <= WINDOW < max(t["client_tokens"] for t in turns)
    compactions = sum(1 for t in turns if t["shadow"]["compacted"])
    assert 2 <= compactions <= 15, f"the compactions managed mode would have made, in steps ({compactions})"
    totals = journal["totals"]
    assert totals["compactions"] == compactions and totals["summarizer_cost_usd"] > 0
    assert totals["saved_tokens"] == sum(t["client_tokens"] for t in turns) - sum(composed) > 0
    assert [t["saved_tokens"] for t in turns] == [t["client_tokens"] - c for t, c in zip(turns, composed, strict=True)]

    code, out, _ = await report(proxy, tmp_path, capsys, "--since", "1d")
    assert code == 0
    with capsys.disabled():  # the figures docs/savings.md quotes (`pytest -s` shows them)
        print(out)
    (row,) = [line.split() for line in out.splitlines() if "(shadow)" in line]
    assert (int(row[3]), int(row[5]), int(row[6])) == (60, totals["sent_tokens"], totals["saved_tokens"])
    assert int(row[9]) == compactions

    managed = await start_proxy(_settings(flushed_redis, fake.url, "managed"))  # type: ignore[attr-defined]
    history = await _turn(managed, history, 60)
    assert fake.summaries, "the first managed turn compacts for real"
    assert len(fake.chats[-1]["messages"]) < len(history) - 1
    _, journal = await session_json(managed, "shadowed")
    assert len(journal["turns"]) == 61 and journal["turns"][-1]["shadow"] is None
    assert journal["window"]["current"] == "win_1", "the session was kept"


async def test_a_gateway_key_in_shadow_mode_shadows_its_turns_only(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str
) -> None:
    keys = [{"name": "trial", "key": "sk-gw-trial", "mode": "shadow"}, {"name": "team", "key": "sk-gw-team"}]
    proxy = await start_proxy(gateway_settings(flushed_redis, fake.url, keys=keys))  # type: ignore[attr-defined]
    for key in ("sk-gw-trial", "sk-gw-team"):
        client = proxy.client(key, default_headers={"X-Session-Id": "same-name"})
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    _, trial = await session_json(proxy, "same-name", key="sk-gw-trial")
    _, team = await session_json(proxy, "same-name", key="sk-gw-team")
    assert trial["turns"][0]["shadow"] is not None and team["turns"][0]["shadow"] is None
    with pytest.raises(BadRequest, match="mode: must be managed or shadow"):
        new_policy({"name": "x", "mode": "dry-run"}, "secret")
