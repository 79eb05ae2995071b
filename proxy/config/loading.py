"""YAML plus environment -> frozen, validated settings, once, at start (`load_settings`)."""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from proxy.config import checks
from proxy.config.checks import worker_count
from proxy.config.settings import GatewayKeySettings, Settings
from proxy.errors import ConfigError

ENVIRONMENT_DEFAULTS = {
    "server": {"log_format": "${LOG_FORMAT:-text}"},
    "upstream": {"base_url": "${UPSTREAM_BASE_URL:-https://api.openai.com/v1}", "api_key": "${OPENAI_API_KEY:-}"},
    "redis": {"url": "${REDIS_URL:-embedded}"},
    "gateway": {
        "admin_key": "${CONTEXT_PROXY_ADMIN_KEY:-}",
        "allow_anonymous": "${CONTEXT_PROXY_ALLOW_ANONYMOUS:-false}",
    },
}
"""Without a config file, the environment variables the shipped `config.yaml` reads still apply."""

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, env: Mapping[str, str], path: str = "") -> Any:
    """Replace `${VAR}` and `${VAR:-default}` in every string value; an unset bare `${VAR}` is an error."""
    if isinstance(value, dict):
        return {k: expand_env(v, env, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, env, f"{path}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env and (env[name] != "" or default is None):
            return env[name]
        if default is not None:
            return default
        raise ConfigError(f"{path}: environment variable {name} is not set (write ${{{name}:-}} to allow empty)")

    expanded = _ENV_REF.sub(replace, value)
    if expanded != value and re.fullmatch(r"null|~", expanded.strip()):
        return None
    return expanded


def config_file(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The file `load_settings` reads: the one named, else `./config.yaml` if it exists, else None (defaults)."""
    env = os.environ if env is None else env
    config_path = Path(path or env.get("CONTEXT_PROXY_CONFIG") or "config.yaml")
    explicit = path is not None or "CONTEXT_PROXY_CONFIG" in env
    return config_path if explicit or config_path.exists() else None


def load_settings(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read the config file (or the defaults when the default path does not exist)."""
    env = os.environ if env is None else env
    config_path = config_file(path, env)
    if config_path is None:
        return settings_from_mapping(expand_env(ENVIRONMENT_DEFAULTS, env))
    if not config_path.exists():
        raise ConfigError(f"config: file {config_path} does not exist")
    try:
        raw = yaml.safe_load(config_path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"config: {config_path} is not valid YAML: {exc}".replace("\n", " ")) from exc
    return settings_from_mapping(expand_env(raw or {}, env))


def settings_from_mapping(raw: Any) -> Settings:
    result: Settings = _build(Settings, raw, "")
    redis = result.redis
    if redis.cluster and not redis.url.startswith(("redis://", "rediss://")):
        raise ConfigError(
            f"redis.cluster: needs redis.url to name seed nodes (redis:// or rediss://), got {redis.url!r}"
        )
    if not redis.cluster and "," in redis.url:
        raise ConfigError("redis.url: several seed nodes need redis.cluster: true")
    if redis.wait_replicas and redis.url == "embedded":
        raise ConfigError(
            "redis.wait_replicas: the embedded server has no replicas; set redis.url to a replicated Redis"
        )
    context = result.context
    if context.compact_after <= context.keep_recent:
        raise ConfigError(
            f"context.compact_after: must be > context.keep_recent ({context.keep_recent}), got {context.compact_after}"
        )
    for index, rule in enumerate(context.compact.clear):
        if rule.target != "tool-result" and (rule.keep_recent is not None or rule.tool_filter or rule.exempt_tools):
            raise ConfigError(
                f"context.compact.clear[{index}]: keep_recent, tool_filter and exempt_tools apply only to "
                f"target tool-result, not {rule.target}"
            )
    _check_gateway_keys(result.gateway.keys)
    return result


def _check_gateway_keys(keys: tuple[GatewayKeySettings, ...]) -> None:
    seen: set[str] = set()
    for index, key in enumerate(keys):
        path = f"gateway.keys[{index}]"
        if (key.key is None) == (key.key_sha256 is None):
            raise ConfigError(f"{path}: give exactly one of key and key_sha256")
        if key.key is not None and not key.key.strip():
            raise ConfigError(f"{path}.key: must not be empty")
        if key.name in seen:
            raise ConfigError(f"{path}.name: {key.name!r} is used by an earlier key")
        seen.add(key.name)


def _build(cls: type[Any], raw: Any, path: str) -> Any:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path or 'config'}: must be a mapping, got {_kind(raw)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, spec in fields.items():
        required = spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
        if required and name not in raw:
            raise ConfigError(f"{path}.{name}: required")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key not in fields:
            raise ConfigError(f"{key_path}: unknown key; allowed: {', '.join(fields)}")
        parse = fields[key].metadata.get("parse")
        if parse is None:
            values[key] = _coerce(hints[key], value, key_path)
        else:
            try:
                values[key] = parse(value)
            except ValueError as exc:
                raise ConfigError(f"{key_path}: {exc}") from exc
        check = fields[key].metadata.get("check")
        if check is not None and values[key] is not None:
            problem = check(values[key])
            if problem:
                raise ConfigError(f"{key_path}: {problem}")
    return cls(**values)


def _coerce(hint: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(inner, value, path)
    if hint is Any:
        return value
    if dataclasses.is_dataclass(hint):
        shorthand = getattr(hint, "SHORTHAND", None)
        if shorthand is not None and isinstance(value, str):
            value = {shorthand: value}
        return _build(hint, value, path)  # type: ignore[arg-type]
    if origin is Mapping:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: must be a mapping, got {_kind(value)}")
        return {str(k): _coerce(args[1], v, f"{path}.{k}") for k, v in value.items()}
    if origin is tuple and dataclasses.is_dataclass(args[0]):
        if not isinstance(value, list):
            raise ConfigError(f"{path}: must be a list, got {_kind(value)}")
        return tuple(_coerce(args[0], item, f"{path}[{i}]") for i, item in enumerate(value))
    if origin is tuple:
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(item, str) for item in items):
            raise ConfigError(f"{path}: must be a string or a list of strings, got {value!r}")
        return tuple(items)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif hint is str and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ConfigError(f"{path}: must be {_hint_name(hint)}, got {_kind(value)} {value!r}")


def _hint_name(hint: Any) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(hint, str(hint))


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def with_overrides(
    settings: Settings, *, host: str | None = None, port: int | None = None, workers: str | None = None
) -> Settings:
    server = settings.server
    if workers is not None:
        try:
            server = dataclasses.replace(server, workers=worker_count(workers))
        except ValueError as exc:
            raise ConfigError(f"--workers: {exc}") from exc
    if host is not None:
        server = dataclasses.replace(server, host=host)
    if port is not None:
        problem = checks.port(port)
        if problem:
            raise ConfigError(f"--port: {problem}")
        server = dataclasses.replace(server, port=port)
    return dataclasses.replace(settings, server=server)
