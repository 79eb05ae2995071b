"""Config: environment substitution, validation messages that name the key."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from proxy.config import Settings, load_settings, settings_from_mapping, with_overrides
from proxy.errors import ConfigError


def test_shipped_config_loads_with_defaults(tmp_path: Path) -> None:
    settings = load_settings(Path(__file__).parent.parent / "config.yaml", env={})
    assert settings.redis.url == "embedded"
    assert settings.context.strategy == ("summarize",)
    assert settings.upstream.base_url == "https://api.openai.com/v1"
    assert settings.upstream.api_key == ""


def test_without_a_config_file_the_shipped_configs_environment_still_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./config.yaml here
    env = {"UPSTREAM_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-env", "REDIS_URL": "redis://r:6379/0"}
    settings = load_settings(env=env)
    assert settings.upstream.base_url == "http://127.0.0.1:9/v1" and settings.upstream.api_key == "sk-env"
    assert settings.redis.url == "redis://r:6379/0"
    assert load_settings(env={}) == Settings(), "and nothing else changes"


def test_the_defaults_read_the_same_environment_as_the_shipped_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "UPSTREAM_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-env", "REDIS_URL": "redis://r:6379/0",
        "LOG_FORMAT": "json", "CONTEXT_PROXY_ADMIN_KEY": "admin", "CONTEXT_PROXY_ALLOW_ANONYMOUS": "true",
    }  # fmt: skip
    shipped = load_settings(Path(__file__).parent.parent / "config.yaml", env=env)
    monkeypatch.chdir(tmp_path)
    without_examples = dataclasses.replace(shipped, context=dataclasses.replace(shipped.context, models={}))
    assert load_settings(env=env) == without_examples, "config.yaml and ENVIRONMENT_DEFAULTS drifted apart"


def test_env_substitution(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "server:\n  port: ${PORT:-9000}\nupstream:\n  api_key: ${KEY}\ncontext:\n  compression_model: ${CM:-null}\n"
    )
    settings = load_settings(path, env={"KEY": "sk-1"})
    assert settings.server.port == 9000 and settings.upstream.api_key == "sk-1"
    assert settings.context.compression_model is None
    with pytest.raises(ConfigError, match=r"upstream.api_key: environment variable KEY is not set"):
        load_settings(path, env={})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"context": {"trigger_ratio": 1.5}}, "context.trigger_ratio: must be > 0 and <= 1, got 1.5"),
        ({"context": {"strategy": "magic"}}, "context.strategy: unknown strategy 'magic'"),
        ({"server": {"prot": 1}}, "server.prot: unknown key; allowed: host, port"),
        ({"server": {"port": "eighty"}}, "server.port: must be an integer"),
        ({"server": {"workers": 0}}, "server.workers: must be an integer >= 1 or 'auto', got 0"),
        ({"server": {"workers": "many"}}, "server.workers: must be an integer >= 1 or 'auto', got 'many'"),
        ({"redis": {"url": "http://x"}}, "redis.url: must be 'embedded'"),
        ({"context": {"keep_recent": 10, "compact_after": 10}}, "context.compact_after: must be > context.keep_recent"),
        ({"context": {"models": {"m": {"context_window": 0}}}}, "context.models.m.context_window: must be > 0"),
        ({"context": {"usage_preference": "guess"}}, "context.usage_preference: must be one of max, feed_first"),
        ([1, 2], "config: must be a mapping"),
        ({"context": {"tools": {"max_rounds": 0}}}, "context.tools.max_rounds: must be > 0, got 0"),
        ({"context": {"tools": {"recall": "maybe"}}}, "context.tools.recall: must be true or false"),
        ({"context": {"tools": {"recal": True}}}, "context.tools.recal: unknown key; allowed: recall, new_context"),
        ({"context": {"handoff": {"budget_tokens": 0}}}, "context.handoff.budget_tokens: must be > 0, got 0"),
        ({"context": {"handoff": {"budget_tokens": 1.5}}}, "context.handoff.budget_tokens: must be an integer"),
        ({"context": {"handoff": {"prompt": "é" * 1001}}}, "context.handoff.prompt: must be at most 2000 UTF-8 bytes"),
        ({"context": {"models": {"m": {"handoff": {"budget_tokens": -1}}}}}, "context.models.m.handoff.budget_tokens"),
        ({"context": {"models": {"m": {"tools": {"max_rounds": "x"}}}}}, "context.models.m.tools.max_rounds"),
        ({"redis": {"wait_replicas": -1}}, "redis.wait_replicas: must be >= 0, got -1"),
        ({"redis": {"wait_replicas": 1}}, "redis.wait_replicas: the embedded server has no replicas"),
        ({"redis": {"wait_timeout_ms": 0}}, "redis.wait_timeout_ms: must be > 0, got 0"),
        ({"redis": {"cluster": "maybe"}}, "redis.cluster: must be true or false"),
        ({"redis": {"cluster": True}}, "redis.cluster: needs redis.url to name seed nodes"),
        ({"redis": {"url": "redis://a:1,redis://b:2"}}, "redis.url: several seed nodes need redis.cluster: true"),
        ({"redis": {"url": "redis://a:1,unix:///s", "cluster": True}}, "redis.url: several URLs name the seed nodes"),
    ],
)
def test_bad_values_are_refused_naming_the_key(raw: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from_mapping(raw)
    assert message in str(info.value)


def test_context_tools_and_handoff_per_model() -> None:
    raw = {
        "context": {
            "tools": {"new_context": True, "max_rounds": 5},
            "handoff": {"budget_tokens": 4000},
            "models": {"m": {"tools": {"recall": False}, "handoff": {"budget_tokens": 100, "prompt": "{n_remaining}"}}},
        }
    }
    context = settings_from_mapping(raw).context
    assert context.tools_for("other").max_rounds == 5 and context.tools_for("other").new_context
    assert context.tools_for("m").recall is False and context.tools_for("m").new_context is False, "a whole block"
    assert context.handoff_for("other").budget_tokens == 4000  # type: ignore[union-attr]
    assert context.handoff_for("m").prompt == "{n_remaining}"  # type: ignore[union-attr]
    defaults = settings_from_mapping({}).context
    assert defaults.tools_for("m").recall and not defaults.tools_for("m").new_context and defaults.handoff is None


def test_a_cluster_is_named_by_its_seed_nodes() -> None:
    redis = settings_from_mapping(
        {"redis": {"url": "redis://10.0.0.1:7000, redis://10.0.0.2:7000", "cluster": "true", "wait_replicas": 1}}
    ).redis
    assert (redis.cluster, redis.wait_replicas, redis.wait_timeout_ms) == (True, 1, 1000)


def test_strategy_lists_and_background_are_accepted() -> None:
    settings = settings_from_mapping({"context": {"strategy": ["background(summarize)", "reset"]}})
    assert settings.context.strategy == ("background(summarize)", "reset")


def test_cli_overrides() -> None:
    settings = with_overrides(settings_from_mapping({}), host="0.0.0.0", port=9999)
    assert (settings.server.host, settings.server.port) == ("0.0.0.0", 9999)
    with pytest.raises(ConfigError, match="--port"):
        with_overrides(settings, port=70000)


def test_workers_auto_is_the_number_of_cores() -> None:
    assert settings_from_mapping({}).server.workers == 1
    assert settings_from_mapping({"server": {"workers": "auto"}}).server.workers == (os.cpu_count() or 1)
    assert settings_from_mapping({"server": {"workers": "3"}}).server.workers == 3
    assert with_overrides(settings_from_mapping({}), workers="auto").server.workers == (os.cpu_count() or 1)
    with pytest.raises(ConfigError, match="--workers: must be an integer >= 1 or 'auto', got 0"):
        with_overrides(settings_from_mapping({}), workers="0")


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.yaml", env={})


def test_seed_options_parse() -> None:
    settings = settings_from_mapping(
        {"context": {
            "strategy": ["server(summarize)", "reset"],
            "compact": {"clear": [{"target": "tool-result", "keep_recent": 5, "tool_filter": ["run_bash"],
                                   "exempt_tools": ["read_file"]}, "thinking", "reasoning-tags"]},
            "server": {"params": {"transforms": ["middle-out"]}},
            "compression_guidelines": ["Preserve ticket IDs verbatim"],
            "models": {"m": {"tool_result_stub_threshold": 500, "builder": "pkg.mod:build", "use_preferred": True}},
        }}
    )  # fmt: skip
    context = settings.context
    assert [c.target for c in context.compact.clear] == ["tool-result", "thinking", "reasoning-tags"]
    assert context.compact.clear[0].keep_recent == 5 and context.compact.clear[0].exempt_tools == ("read_file",)
    assert context.server.params == {"transforms": ["middle-out"]}
    assert context.builder_for("m") == "pkg.mod:build" and context.builder_for("other") is None
    assert context.use_preferred_for("m") and not context.use_preferred_for("other")


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"compact": {"clear": ["everything"]}}, r"context.compact.clear\[0\].target: must be one of"),
        ({"compact": {"clear": [{"target": "tool-result", "keep_recent": 0}]}},
         r"context.compact.clear\[0\].keep_recent: must be > 0"),
        ({"compact": {"clear": [{"target": "thinking", "keep_recent": 2}]}},
         r"context.compact.clear\[0\]: keep_recent, tool_filter and exempt_tools apply only to target tool-result"),
        ({"compact": {"clear": "thinking"}}, r"context.compact.clear: must be a list"),
        ({"strategy": "server"}, r"context.strategy: 'server': server needs a fallback"),
        ({"strategy": "server(nope)"}, r"context.strategy: unknown strategy"),
        ({"server": {"params": ["x"]}}, r"context.server.params: must be a mapping"),
        ({"hooks": {"before_overflow": "not a path"}}, r"context.hooks.before_overflow: must be 'package.module:function'"),
        ({"use_preferred": "maybe"}, r"context.use_preferred: must be true or false"),
    ],
)  # fmt: skip
def test_seed_option_errors_name_the_key(context: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_mapping({"context": context})
