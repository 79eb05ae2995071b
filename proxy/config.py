"""YAML plus environment -> frozen, validated settings, once, at start.

`${VAR}` and `${VAR:-default}` are replaced from the environment before parsing.
Every key is checked against the dataclasses below: an unknown key or a bad value is
refused with one line that names the key path and what is allowed. Nothing else in
the proxy reads `os.environ`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from proxy.errors import ConfigError

STRATEGY_NAMES = ("full", "turns", "summarize", "anchored", "reset")
CLEAR_TARGETS = ("tool-result", "thinking", "reasoning-tags")
USAGE_PREFERENCES = ("max", "feed_first", "tokenizer_first")
SPLITS = ("ratio", "recent-turns")
MAX_PROMPT_BYTES = 2000
HANDOFF_PROMPT = "About {n_remaining} tokens remain before this conversation is compacted. Note anything you must keep."
LOG_FORMATS = ("text", "json")
BUDGET_PERIODS = ("day", "month")
KEY_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")

Check = Callable[[Any], str | None]


def _positive(value: Any) -> str | None:
    return None if value > 0 else f"must be > 0, got {value}"


def _non_negative(value: Any) -> str | None:
    return None if value >= 0 else f"must be >= 0, got {value}"


def _ratio(value: Any) -> str | None:
    return None if 0 < value <= 1 else f"must be > 0 and <= 1, got {value}"


def _unit(value: Any) -> str | None:
    return None if 0 <= value < 1 else f"must be >= 0 and < 1, got {value}"


def _one_of(*allowed: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}, got {value!r}"

    return check


def _port(value: Any) -> str | None:
    return None if 0 <= value <= 65535 else f"must be a port number 0-65535, got {value}"


def _url(value: Any) -> str | None:
    ok = value.startswith(("http://", "https://"))
    return None if ok else f"must start with http:// or https://, got {value!r}"


def _redis_url(value: Any) -> str | None:
    urls = [part.strip() for part in value.split(",")]
    ok = value == "embedded" or all(url.startswith(("redis://", "rediss://", "unix://")) for url in urls)
    if not ok:
        return f"must be 'embedded' or redis://, rediss:// or unix:// URLs (comma-separated), got {value!r}"
    if len(urls) > 1 and not all(url.startswith(("redis://", "rediss://")) for url in urls):
        return f"several URLs name the seed nodes of a cluster: redis:// or rediss:// only, got {value!r}"
    return None


def _prompt(value: Any) -> str | None:
    size = len(value.encode())
    return None if size <= MAX_PROMPT_BYTES else f"must be at most {MAX_PROMPT_BYTES} UTF-8 bytes, got {size}"


def _header_name(value: Any) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9-]+", value) else f"must be an HTTP header name, got {value!r}"


def key_name_problem(value: Any) -> str | None:
    """Why a gateway key name is not allowed, or None: it becomes the tenant of the key's sessions."""
    ok = isinstance(value, str) and KEY_NAME.fullmatch(value)
    return None if ok else f"must be 1-64 characters of A-Z a-z 0-9 . _ -, got {value!r}"


def _sha256_hex(value: Any) -> str | None:
    return None if re.fullmatch(r"[0-9a-f]{64}", value) else "must be 64 lowercase hex digits (a sha256)"


def _globs(value: Any) -> str | None:
    return None if value else "must list at least one model glob"


def _strategy(value: Any) -> str | None:
    specs = value if isinstance(value, tuple) else (value,)
    if not specs:
        return "must name at least one strategy"
    for spec in specs:
        name = parse_strategy_spec(spec).name
        if name == "server":
            return f"{spec!r}: server needs a fallback strategy, e.g. server(summarize)"
        if name not in STRATEGY_NAMES:
            allowed = ", ".join(STRATEGY_NAMES)
            return (
                f"unknown strategy {spec!r}; allowed: {allowed}, background(<one of them>), server(<one of them>), "
                "background(server(<one of them>)), or a list"
            )
    return None


@dataclass(frozen=True)
class StrategySpec:
    """One part of a strategy spec: a policy name, maybe run in the background or behind `server`."""

    name: str
    background: bool = False
    server: bool = False


def _unwrap(spec: str, wrapper: str) -> str | None:
    spec = spec.strip()
    if spec.startswith(wrapper + "(") and spec.endswith(")"):
        return spec[len(wrapper) + 1 : -1].strip()
    return None


def parse_strategy_spec(spec: str) -> StrategySpec:
    """`"summarize"`, `"background(anchored)"`, `"server(summarize)"`, `"background(server(summarize))"`."""
    inner = _unwrap(spec, "background")
    background = inner is not None
    rest = inner if inner is not None else spec.strip()
    fallback = _unwrap(rest, "server")
    if fallback is not None:
        return StrategySpec(fallback, background, server=True)
    return StrategySpec(rest, background)


def _import_path(value: Any) -> str | None:
    ok = re.fullmatch(r"[A-Za-z_][\w.]*[:.][A-Za-z_]\w*", value)
    return None if ok else f"must be 'package.module:function', got {value!r}"


def worker_count(value: Any) -> int:
    """`server.workers` and `--workers`: an integer >= 1, or `auto` for the number of cores."""
    if value == "auto":
        return os.cpu_count() or 1
    if isinstance(value, str) and re.fullmatch(r"\d+", value.strip()):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ValueError(f"must be an integer >= 1 or 'auto', got {value!r}")


def _check(fn: Check, default: Any = dataclasses.MISSING) -> Any:
    if default is dataclasses.MISSING:
        return field(metadata={"check": fn})
    return field(default=default, metadata={"check": fn})


def _parsed(parse: Callable[[Any], Any], default: Any) -> Any:
    """A field whose raw value `parse` turns into the setting, or refuses with ValueError."""
    return field(default=default, metadata={"parse": parse})


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = _check(_port, 8080)
    max_body_mb: float = _check(_positive, 32.0)
    shutdown_timeout_s: float = _check(_positive, 30.0)
    cache_messages: int = _check(_non_negative, 25000)
    log_format: str = _check(_one_of(*LOG_FORMATS), "text")
    workers: int = _parsed(worker_count, 1)


@dataclass(frozen=True)
class UpstreamSettings:
    base_url: str = _check(_url, "https://api.openai.com/v1")
    api_key: str = ""
    timeout_s: float = _check(_positive, 600.0)
    read_timeout_s: float = _check(_positive, 300.0)
    """The longest silence allowed while waiting for an answer's headers or its next bytes."""
    connect_timeout_s: float = _check(_positive, 10.0)
    max_connections: int = _check(_positive, 256)


@dataclass(frozen=True)
class RedisSettings:
    url: str = _check(_redis_url, "embedded")
    data_dir: str = ".data"
    cluster: bool = False
    wait_replicas: int = _check(_non_negative, 0)
    wait_timeout_ms: int = _check(_positive, 1000)


@dataclass(frozen=True)
class SessionSettings:
    header: str = _check(_header_name, "X-Session-Id")
    ttl_s: int = _check(_positive, 2592000)


@dataclass(frozen=True)
class ClearTarget:
    """One entry of `context.compact.clear`: a string is shorthand for `{target: <string>}`."""

    SHORTHAND = "target"
    target: str = _check(_one_of(*CLEAR_TARGETS), "tool-result")
    keep_recent: int | None = _check(_positive, None)
    tool_filter: tuple[str, ...] = ()
    exempt_tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompactSettings:
    """Mechanical compaction (ContextChef's `compact()`): cleared in what is sent, never in the journal."""

    clear: tuple[ClearTarget, ...] = ()


@dataclass(frozen=True)
class ServerStrategySettings:
    """The `server(fallback)` strategy: what is merged into the upstream body."""

    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HookSettings:
    before_overflow: str | None = _check(_import_path, None)
    after_overflow: str | None = _check(_import_path, None)


@dataclass(frozen=True)
class ToolSettings:
    """`context.tools`: the tools the proxy serves itself (the client never sees them)."""

    recall: bool = True
    """Offer `recall_context` while the session has archived spans."""
    new_context: bool = False
    max_rounds: int = _check(_positive, 3)
    """Tool rounds the proxy runs itself within one client request."""


@dataclass(frozen=True)
class HandoffSettings:
    """`context.handoff`: a one-per-window notice that compaction is near (no block: no notice)."""

    budget_tokens: int = _check(_positive, 4000)
    prompt: str = _check(_prompt, HANDOFF_PROMPT)


@dataclass(frozen=True)
class ModelSettings:
    """Per-model overrides; None means "use the `context` default" (`tools` and `handoff`
    replace the default block as a whole)."""

    context_window: int | None = _check(_positive, None)
    trigger_ratio: float | None = _check(_ratio, None)
    strategy: tuple[str, ...] | None = _check(_strategy, None)
    encoding: str | None = None
    tool_result_stub_threshold: int | None = _check(_positive, None)
    compression_guidelines: tuple[str, ...] | None = None
    custom_compression_instructions: str | None = None
    builder: str | None = _check(_import_path, None)
    use_preferred: bool | None = None
    tools: ToolSettings | None = None
    handoff: HandoffSettings | None = None
    fallbacks: tuple[str, ...] = ()
    """Models to try, in order, when this one's upstream fails before anything was relayed."""


@dataclass(frozen=True)
class ContextSettings:
    strategy: tuple[str, ...] = _check(_strategy, ("summarize",))
    context_window: int = _check(_positive, 128000)
    trigger_ratio: float = _check(_ratio, 0.7)
    usage_preference: str = _check(_one_of(*USAGE_PREFERENCES), "max")
    compression_model: str | None = None
    compression_timeout_s: float = _check(_positive, 60.0)
    split: str = _check(_one_of(*SPLITS), "ratio")
    preserve_ratio: float = _check(_ratio, 0.8)
    preserve_recent_messages: int = _check(_positive, 1)
    keep_recent: int = _check(_non_negative, 8)
    compact_after: int = _check(_positive, 20)
    min_shrink_ratio: float = _check(_unit, 0.5)
    validator: str | None = None
    tool_result_stub_threshold: int | None = _check(_positive, None)
    compression_guidelines: tuple[str, ...] = ()
    custom_compression_instructions: str | None = None
    compact: CompactSettings = field(default_factory=CompactSettings)
    server: ServerStrategySettings = field(default_factory=ServerStrategySettings)
    hooks: HookSettings = field(default_factory=HookSettings)
    builder: str | None = _check(_import_path, None)
    use_preferred: bool = False
    tools: ToolSettings = field(default_factory=ToolSettings)
    handoff: HandoffSettings | None = None
    models: Mapping[str, ModelSettings] = field(default_factory=dict)

    def for_model(self, model: str) -> ModelSettings:
        return self.models.get(model) or ModelSettings()

    def builder_for(self, model: str) -> str | None:
        override = self.for_model(model).builder
        return override if override is not None else self.builder

    def use_preferred_for(self, model: str) -> bool:
        override = self.for_model(model).use_preferred
        return override if override is not None else self.use_preferred

    def tools_for(self, model: str) -> ToolSettings:
        return self.for_model(model).tools or self.tools

    def handoff_for(self, model: str) -> HandoffSettings | None:
        return self.for_model(model).handoff or self.handoff


@dataclass(frozen=True)
class GatewayKeySettings:
    """A static gateway key; its name is the tenant of its sessions."""

    name: str = _check(key_name_problem)
    key: str | None = None
    key_sha256: str | None = _check(_sha256_hex, None)
    models: tuple[str, ...] | None = _check(_globs, None)
    rpm: int | None = _check(_positive, None)
    tpm: int | None = _check(_positive, None)
    budget_tokens: int | None = _check(_positive, None)
    budget_period: str = _check(_one_of(*BUDGET_PERIODS), "day")


@dataclass(frozen=True)
class GatewaySettings:
    keys: tuple[GatewayKeySettings, ...] = ()
    admin_key: str = ""
    allow_anonymous: bool = False


@dataclass(frozen=True)
class RouteSettings:
    """Requests whose model matches one of `models` (shell-style globs) go to this upstream."""

    models: tuple[str, ...] = _check(_globs)
    base_url: str = _check(_url)
    api_key: str = ""
    timeout_s: float = _check(_positive, 600.0)
    read_timeout_s: float = _check(_positive, 300.0)
    connect_timeout_s: float = _check(_positive, 10.0)


@dataclass(frozen=True)
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    upstream: UpstreamSettings = field(default_factory=UpstreamSettings)
    redis: RedisSettings = field(default_factory=RedisSettings)
    sessions: SessionSettings = field(default_factory=SessionSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    routes: tuple[RouteSettings, ...] = ()


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
        return Settings()
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
    elif hint is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
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
        problem = _port(port)
        if problem:
            raise ConfigError(f"--port: {problem}")
        server = dataclasses.replace(server, port=port)
    return dataclasses.replace(settings, server=server)
