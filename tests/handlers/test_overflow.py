"""Long conversations against the fake's small model, which refuses over-long prompts."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from proxy.app_state import TURNS
from tests.conftest import Proxy, ProxyFactory, make_settings, replace_context
from tests.fake_upstream import FakeOpenAI
from tests.handlers.test_sessions import session_json

SYSTEM = {"role": "system", "content": "You are the keeper of facts. Never forget the user's name."}
PINNED = {"role": "user", "content": "Policy: always answer in English.", "pinned": True}
WINDOW = 3000  # tiny-model


def filler(n: int) -> str:
    return f"turn {n}: " + " ".join(f"fact{n}-{k} is topic {k * n % 97}" for k in range(4))


def delta_turn(n: int) -> list[dict[str, Any]]:
    """What a delta client sends for turn n: the system prompt once, then one user message."""
    user = {"role": "user", "content": filler(n)}
    return [SYSTEM, user] if n == 0 else [user]


def prompt_tokens(proxy: Proxy) -> list[int]:
    return [proxy.fake.prompt_tokens(body["messages"]) for body in proxy.fake.chats]


async def run_conversation(
    proxy: Proxy, session: str, turns: int, *, full_history: bool, first: list[dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    client = proxy.client(default_headers={"X-Session-Id": session})
    history: list[dict[str, Any]] = list(first)
    windows = []
    for n in range(turns):
        user = {"role": "user", "content": filler(n)}
        messages = [*history, user] if full_history else ([*first, user] if n == 0 else [user])
        raw = await client.chat.completions.with_raw_response.create(model="tiny-model", messages=messages)
        windows.append(raw.headers["X-Context-Window-Id"])
        answer = raw.parse().choices[0].message.content
        history += [user, {"role": "assistant", "content": answer}]
        sent = proxy.fake.chats[-1]["messages"]
        assert sent[0] == SYSTEM, "the system prompt stays first and verbatim"
        assert sent[-1] == user, "the last user message is verbatim"
    return windows, history


@pytest.mark.parametrize("full_history", [False, True], ids=["delta", "full-history"])
async def test_sixty_turns_stay_inside_the_window(start_proxy: ProxyFactory, full_history: bool) -> None:
    proxy = await start_proxy(strategy="summarize")
    windows, history = await run_conversation(proxy, "long", 60, full_history=full_history, first=[SYSTEM])
    sizes = prompt_tokens(proxy)
    ratio = proxy.fake.prompt_tokens(history) / WINDOW
    assert 1.5 <= ratio <= 2.5, f"the conversation outgrows the window about 1.6 times ({ratio:.2f})"
    assert max(sizes) <= WINDOW
    compactions = len(set(windows)) - 1
    print(f"turns=60 compactions={compactions} peak_prompt={max(sizes)} window={WINDOW} whole={ratio:.2f}x")
    assert 2 <= compactions <= 15, f"compaction happens in steps, not every turn ({compactions})"
    assert len(proxy.fake.summaries) == compactions
    summary = proxy.fake.chats[-1]["messages"][1]
    assert summary["role"] == "user" and "continues" in summary["content"] and "## Task Overview" in summary["content"]
    assert "<analysis>" not in summary["content"] and "context://archive/win_" in summary["content"]
    _, journal = await session_json(proxy, "long")
    assert len(journal["turns"]) == 60 and all(t["status"] == "completed" for t in journal["turns"])
    archive_id = summary["content"].split("context://archive/")[1].split(".)")[0]
    status, archived = await session_json(proxy, "long", suffix=f"/archive/{archive_id}")
    assert status == 200 and archived["messages"], "the span the summary cites can be read back"
    assert {m["content"] for m in archived["messages"] if m["role"] == "user"} <= {
        m["content"] for m in history if m["role"] == "user"
    }
    assert [w["id"] for w in journal["windows"]] == [f"win_{n}" for n in range(compactions + 1)]


async def test_prefix_is_byte_identical_between_compactions(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    windows, _ = await run_conversation(proxy, "cache", 30, full_history=True, first=[SYSTEM])
    chats = proxy.fake.chats
    for n in range(1, len(chats)):
        if windows[n] == windows[n - 1]:
            before, after = chats[n - 1]["messages"], chats[n]["messages"]
            assert after[: len(before)] == before


async def test_pinned_message_survives_to_the_end(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    await run_conversation(proxy, "pinned", 40, full_history=False, first=[SYSTEM, PINNED])
    sent = proxy.fake.chats[-1]["messages"]
    stripped = {k: v for k, v in PINNED.items() if k != "pinned"}
    assert stripped in sent, "the pinned message is still sent, without the proxy's marker"
    assert all("pinned" not in m for m in sent)
    assert sent.index(stripped) > sent.index(SYSTEM)


async def test_tool_call_pairs_never_split(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = proxy.client(default_headers={"X-Session-Id": "tools"})
    await client.chat.completions.create(model="tiny-model", messages=[SYSTEM, {"role": "user", "content": "hello"}])
    for n in range(30):
        answer = await client.chat.completions.create(
            model="tiny-model", messages=[{"role": "user", "content": filler(n) + " call tool look"}]
        )
        call = answer.choices[0].message.tool_calls[0]  # type: ignore[index]
        await client.chat.completions.create(
            model="tiny-model", messages=[{"role": "tool", "tool_call_id": call.id, "content": "result " + filler(n)}]
        )
    assert len(proxy.fake.summaries) >= 2
    for body in proxy.fake.chats:  # the fake refuses orphans and unanswered calls: every request was valid
        assert body["messages"][0] == SYSTEM
    assert max(prompt_tokens(proxy)) <= WINDOW


async def test_summarizer_failures_lose_nothing(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize", context_window=128000)
    proxy.fake.fail_summaries = 2
    client = proxy.client(default_headers={"X-Session-Id": "flaky"})
    for n in range(30):
        await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": filler(n)}])
    _, journal = await session_json(proxy, "flaky")
    assert len(journal["turns"]) == 30 and all(t["status"] == "completed" for t in journal["turns"])
    failures = [e for e in journal["events"] if e["type"] == "compaction_failed"]
    assert len(failures) == 2
    assert any(e["type"] == "compaction" for e in journal["events"]), "the third attempt landed"
    assert max(prompt_tokens(proxy)) <= WINDOW


async def test_breaker_opens_after_three_failures_and_requests_still_go(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    proxy.fake.fail_summaries = 100
    client = proxy.client(default_headers={"X-Session-Id": "broken"})
    answered, refused = 0, []
    for n in range(40):
        try:
            await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": filler(n)}])
            answered += 1
        except openai.BadRequestError as exc:
            refused.append(exc.body["code"])  # type: ignore[index]
    _, journal = await session_json(proxy, "broken")
    failures = [e for e in journal["events"] if e["type"] == "compaction_failed"]
    assert len(failures) == 3, "after three failures the breaker stops trying"
    assert len(proxy.fake.summaries) == 3
    assert answered > 25, "requests that still fit the hard window go out"
    assert set(refused) <= {"context_length_exceeded"}, "once nothing fits, a clear 400, never a 500"
    assert len(journal["turns"]) == answered


async def test_context_length_exceeded_when_nothing_can_fit(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    client = proxy.client(default_headers={"X-Session-Id": "huge"})
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": "word " * 5000}])
    assert info.value.body["code"] == "context_length_exceeded"  # type: ignore[index]
    assert "too many" in info.value.body["message"]  # type: ignore[index]
    assert proxy.fake.chats == []


@pytest.mark.parametrize("strategy", ["turns", "anchored", "reset", "summarize,reset", "background(summarize)"])
async def test_every_strategy_keeps_a_long_conversation_going(start_proxy: ProxyFactory, strategy: str) -> None:
    proxy = await start_proxy(strategy="full", keep_recent=4, compact_after=10)
    client = proxy.client(default_headers={"X-Session-Id": "s", "X-Context-Strategy": strategy})
    headers = []
    for n in range(40):
        messages = delta_turn(n)
        raw = await client.chat.completions.with_raw_response.create(model="tiny-model", messages=messages)
        headers.append(raw.headers["X-Context-Window-Id"])
        await proxy.idle()
        assert proxy.fake.chats[-1]["messages"][0] == SYSTEM
    assert len(set(headers)) >= 2, f"{strategy} never compacted"
    assert max(prompt_tokens(proxy)) <= WINDOW
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url + "/v1/sessions/s", headers={"Authorization": "Bearer sk-test"}) as r:
            journal = await r.json()
    assert len(journal["turns"]) == 40
    if strategy == "turns":
        first_summary = next(m for m in proxy.fake.chats[-1]["messages"] if m["role"] == "user")
        assert first_summary["content"].startswith("Summary of the earlier conversation:")


async def test_a_branch_from_before_the_boundary_never_sees_the_other_branch_summary(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize")
    windows, history = await run_conversation(proxy, "forked", 30, full_history=True, first=[SYSTEM])
    assert windows[-1] != "win_0"
    edited = [*history[:3], {"role": "user", "content": "a different second question"}]
    raw = await proxy.client(default_headers={"X-Session-Id": "forked"}).chat.completions.with_raw_response.create(
        model="tiny-model", messages=edited
    )
    assert proxy.fake.chats[-1]["messages"] == edited, (
        "the new branch is sent as it is, without the old branch's summary"
    )
    assert raw.headers["X-Context-Window-Id"] == windows[-1], "the lineage is the session's"
    _, journal = await session_json(proxy, "forked")
    assert len(journal["branches"]) == 2


async def test_per_model_and_per_request_strategies(start_proxy: ProxyFactory) -> None:
    from proxy.config import settings_from_mapping

    proxy = await start_proxy(strategy="full")
    registry = proxy.app[TURNS].deps.strategies
    assert registry.spec_for("tiny-model", None) == ("full",)
    assert registry.spec_for("x", "summarize, reset") == ("summarize", "reset")
    assert registry.spec_for("x", "off") is None
    assert registry.build(("background(anchored)",)).name == "background(anchored)"
    settings = settings_from_mapping({"context": {"models": {"m": {"strategy": "reset"}}}})
    assert type(registry).from_settings(settings.context).spec_for("m", None) == ("reset",)
    client = proxy.client(default_headers={"X-Context-Strategy": "shrink"})
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="tiny-model", messages=[{"role": "user", "content": "x"}])
    assert info.value.body["code"] == "invalid_strategy"  # type: ignore[index]


async def test_a_model_with_another_tokenizer_is_calibrated_from_reported_usage(start_proxy: ProxyFactory) -> None:
    """tiny-llama counts 1.6 times what the proxy's tokenizer does; its window is 3,000 of its own tokens."""
    proxy = await start_proxy(strategy="summarize")
    client = proxy.client(default_headers={"X-Session-Id": "llama"})
    for n in range(45):
        messages = delta_turn(n)
        await client.chat.completions.create(model="tiny-llama", messages=messages)
    reported = [int(proxy.fake.prompt_tokens(body["messages"]) * 1.6) for body in proxy.fake.chats]
    assert max(reported) <= 3000, "the model's own count never went over its window"
    assert proxy.fake.summaries, "compaction happened, triggered by the model's reported usage"


async def test_a_window_the_config_does_not_know_is_learned_from_the_upstream(
    start_proxy: ProxyFactory, flushed_redis: str, fake: FakeOpenAI
) -> None:
    """The config says nothing of tiny-model (so 128k is assumed); the model refuses at 3,000."""
    settings = make_settings(flushed_redis, fake.url, strategy="summarize")  # type: ignore[attr-defined]
    models = {k: v for k, v in settings.context.models.items() if k != "tiny-model"}
    proxy = await start_proxy(replace_context(settings, models=models))
    windows, _ = await run_conversation(proxy, "unsized", 60, full_history=False, first=[SYSTEM])
    refused = [body for body in proxy.fake.received if proxy.fake.prompt_tokens(body["messages"]) > WINDOW]
    assert len(refused) == 1, "one refusal teaches the proxy the window; the same request is retried compacted"
    assert len(set(windows)) > 2
    _, journal = await session_json(proxy, "unsized")
    assert len(journal["turns"]) == 60 and all(t["status"] == "completed" for t in journal["turns"])


def test_model_windows_learn_only_smaller_windows() -> None:
    from proxy.config import ContextSettings, ModelSettings
    from proxy.context.tokens import TokenCounter
    from proxy.turn.windows import ModelWindows

    context = ContextSettings(context_window=128000, models={"other": ModelSettings(context_window=8000)})
    windows = ModelWindows(context, TokenCounter({}))
    message = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."
    assert windows.learn("m", message) and windows.window("m") == 4096
    assert not windows.learn("m", message), "already known"
    assert not windows.learn("other", "This model's maximum context length is 9000 tokens.")
    assert not windows.learn("other", "Rate limit reached")
    assert windows.window("other") == 8000
