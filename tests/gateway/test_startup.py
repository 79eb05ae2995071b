"""Secure by default: `serve` will not expose an upstream key to whoever can reach it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.config import GatewayKeySettings, settings_from_mapping
from proxy.errors import ConfigError
from proxy.gateway import exposure_problem


def _serve(config: Path, host: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config), "--host", host, "--port", "0"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def test_serve_on_all_interfaces_with_an_upstream_key_and_no_gateway_key_refuses(
    tmp_path: Path, flushed_redis: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"upstream:\n  api_key: sk-spendable\nredis:\n  url: {flushed_redis}\n")
    result = _serve(config, "0.0.0.0")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("context-proxy: refusing to listen on 0.0.0.0"), result.stderr
    assert "gateway.keys" in lines[0] and "allow_anonymous" in lines[0] and "sk-spendable" not in lines[0]


@pytest.mark.parametrize(
    ("raw", "host", "refused"),
    [
        ({"upstream": {"api_key": "sk"}}, "0.0.0.0", True),
        ({"upstream": {"api_key": "sk"}}, "::", True),
        ({"upstream": {"api_key": "sk"}}, "10.1.2.3", True),
        ({"routes": [{"models": ["x"], "base_url": "http://h/v1", "api_key": "k"}]}, "0.0.0.0", True),
        ({"upstream": {"api_key": "sk"}}, "127.0.0.1", False),
        ({"upstream": {"api_key": "sk"}}, "::1", False),
        ({"upstream": {"api_key": "sk"}}, "localhost", False),
        ({}, "0.0.0.0", False),
        ({"upstream": {"api_key": "sk"}, "gateway": {"allow_anonymous": True}}, "0.0.0.0", False),
        ({"upstream": {"api_key": "sk"}, "gateway": {"keys": [{"name": "a", "key": "k"}]}}, "0.0.0.0", False),
    ],
)
def test_exposure_rule(raw: dict[str, object], host: str, refused: bool) -> None:
    settings = settings_from_mapping(raw)
    settings = dataclasses.replace(settings, server=dataclasses.replace(settings.server, host=host))
    keys_exist = bool(settings.gateway.keys)
    assert (exposure_problem(settings, keys_exist=keys_exist) is not None) is refused
    if refused:
        assert exposure_problem(settings, keys_exist=True) is None, "a run-time key in redis is enough"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"gateway": {"keys": [{"key": "x"}]}}, "gateway.keys[0].name: required"),
        ({"gateway": {"keys": [{"name": "a b", "key": "x"}]}}, "gateway.keys[0].name: must be 1-64 characters"),
        ({"gateway": {"keys": [{"name": "a"}]}}, "gateway.keys[0]: give exactly one of key and key_sha256"),
        ({"gateway": {"keys": [{"name": "a", "key": ""}]}}, "gateway.keys[0].key: must not be empty"),
        ({"gateway": {"keys": [{"name": "a", "key_sha256": "abc"}]}}, "gateway.keys[0].key_sha256: must be 64"),
        ({"gateway": {"keys": [{"name": "a", "key": "x", "rpm": 0}]}}, "gateway.keys[0].rpm: must be > 0"),
        ({"gateway": {"keys": [{"name": "a", "key": "x", "budget_period": "week"}]}}, "budget_period: must be one of"),
        ({"gateway": {"keys": [{"name": "a", "key": "x"}, {"name": "a", "key": "y"}]}}, "gateway.keys[1].name: 'a' is"),
        ({"gateway": {"keys": {"name": "a"}}}, "gateway.keys: must be a list"),
        ({"gateway": {"admin": "x"}}, "gateway.admin: unknown key; allowed: keys, admin_key, allow_anonymous"),
        ({"routes": [{"models": ["x"]}]}, "routes[0].base_url: required"),
        ({"routes": [{"models": [], "base_url": "http://h/v1"}]}, "routes[0].models: must list at least one"),
        ({"routes": [{"models": ["x"], "base_url": "ftp://h"}]}, "routes[0].base_url: must start with http"),
        ({"context": {"models": {"m": {"fallbacks": [1]}}}}, "context.models.m.fallbacks: must be a string or a list"),
    ],
)
def test_gateway_config_errors_name_the_key(raw: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from_mapping(raw)
    assert message in str(info.value)


def test_key_sha256_is_accepted_for_keys_kept_out_of_the_config() -> None:
    digest = "a" * 64
    settings = settings_from_mapping({"gateway": {"keys": [{"name": "ci", "key_sha256": digest}]}})
    assert settings.gateway.keys == (GatewayKeySettings(name="ci", key_sha256=digest),)
