"""`context-proxy report` (`proxy/session_api/report.py`): the savings figures by key and model."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from proxy.app_state import SETTINGS
from proxy.cli import main
from proxy.session_api.report import since_seconds
from tests.conftest import Proxy, ProxyFactory, replace_context
from tests.fake_upstream import FakeOpenAI
from tests.gateway.conftest import ALICE, BOB, gateway_settings
from tests.handlers.test_overflow import SYSTEM, filler
from tests.handlers.test_sessions import session_json

WINDOW = 4000


async def _chat(proxy: Proxy, key: str, session: str, turns: int, *, full_history: bool) -> list[int]:
    """A conversation with gpt-4o-mini; each turn's prompt as the client sent it, by the fake's count."""
    client = proxy.client(key, default_headers={"X-Session-Id": session})
    history: list[dict[str, Any]] = [SYSTEM]
    prompts = []
    for n in range(turns):
        user = {"role": "user", "content": filler(n)}
        messages = [*history, user] if full_history else ([SYSTEM, user] if n == 0 else [user])
        prompts.append(proxy.fake.prompt_tokens(messages))
        answer = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
        history += [user, {"role": "assistant", "content": answer.choices[0].message.content}]
    return prompts


async def report(proxy: Proxy, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`context-proxy report ARGS` against the proxy's store: its exit code, output and errors."""
    config = tmp_path / "c.yaml"
    redis = proxy.app[SETTINGS].redis
    config.write_text(f"redis:\n  url: {redis.url}\n  cluster: {str(redis.cluster).lower()}\n")
    code = await asyncio.to_thread(main, ["--config", str(config), "report", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _row(out: str, key: str) -> list[str]:
    (line,) = [line for line in out.splitlines() if line.startswith(key + " ")]
    return line.split()


def test_since_reads_days_hours_and_minutes() -> None:
    assert (since_seconds("7d"), since_seconds("24h"), since_seconds("90m")) == (604800, 86400, 5400)
    with pytest.raises(ValueError, match="--since"):
        since_seconds("a week")


async def test_the_report_shows_each_key_and_model_with_its_compactions(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sixty full-history turns to a 4,000-token window under `summarize` (alice), and a delta client (bob)."""
    settings = gateway_settings(flushed_redis, fake.url)  # type: ignore[attr-defined]
    models = dict(settings.context.models)
    models["gpt-4o-mini"] = dataclasses.replace(models["gpt-4o-mini"], context_window=WINDOW)
    proxy = await start_proxy(replace_context(settings, strategy=("summarize",), models=models))
    alice = await _chat(proxy, ALICE, "long", 60, full_history=True)
    bob = await _chat(proxy, BOB, "short", 3, full_history=False)
    await proxy.idle()
    _, journal = await session_json(proxy, "long", key=ALICE)
    totals = journal["totals"]
    code, out, _ = await report(proxy, tmp_path, capsys, "--since", "1d")
    assert code == 0
    with capsys.disabled():  # the figures docs/savings.md quotes (`pytest -s` shows them)
        print(out)
    row = _row(out, "alice")
    assert row[1] == "gpt-4o-mini" and int(row[2]) == 60
    assert (int(row[3]), int(row[4]), int(row[5])) == (sum(alice), totals["sent_tokens"], totals["saved_tokens"])
    assert int(row[5]) > 0 and int(row[8]) == len(proxy.fake.summaries) == totals["compactions"] > 0
    assert float(row[6]) == pytest.approx(totals["cost_usd"], abs=1e-4)
    assert float(row[9]) == pytest.approx(totals["summarizer_cost_usd"], abs=1e-4) and float(row[9]) > 0
    bob_row = _row(out, "bob")
    assert int(bob_row[2]) == 3 and int(bob_row[3]) == sum(bob) and int(bob_row[5]) < 0, "history supplied"
    assert int(_row(out, "total")[1]) == 63

    code, out, _ = await report(proxy, tmp_path, capsys, "--key", "bob")
    assert code == 0 and "alice" not in out and _row(out, "bob") == bob_row
    code, _, err = await report(proxy, tmp_path, capsys, "--since", "soon")
    assert code == 2 and "--since" in err
