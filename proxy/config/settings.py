"""The settings, as frozen dataclasses: every config key, its default and its check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from proxy.config import checks
from proxy.config.checks import (
    BUDGET_PERIODS,
    CLEAR_TARGETS,
    HANDOFF_PROMPT,
    LOG_FORMATS,
    MODES,
    SPLITS,
    STORE_FALSE,
    UPSTREAM_APIS,
    USAGE_PREFERENCES,
    key_name_problem,
    worker_count,
)
from proxy.config.prices import DEFAULT_PRICES, PriceSettings
from proxy.types import frozen


@frozen
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = checks.checked(checks.port, 8080)
    max_body_mb: float = checks.checked(checks.positive, 32.0)
    shutdown_timeout_s: float = checks.checked(checks.positive, 30.0)
    cache_messages: int = checks.checked(checks.non_negative, 25000)
    log_format: str = checks.checked(checks.one_of(*LOG_FORMATS), "text")
    workers: int = checks.parsed_by(worker_count, 1)

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)


@frozen
class UpstreamSettings:
    base_url: str = checks.checked(checks.url, "https://api.openai.com/v1")
    api_key: str = ""
    timeout_s: float = checks.checked(checks.positive, 600.0)
    read_timeout_s: float = checks.checked(checks.positive, 300.0)
    """The longest silence allowed while waiting for an answer's headers or its next bytes."""
    connect_timeout_s: float = checks.checked(checks.positive, 10.0)
    max_connections: int = checks.checked(checks.positive, 256)
    api: str = checks.checked(checks.one_of(*UPSTREAM_APIS), "openai")
    """The upstream's wire API (`proxy/dialects/`): `openai` (Chat Completions) or `anthropic` (Messages)."""


@frozen
class RedisSettings:
    url: str = checks.checked(checks.redis_url, "embedded")
    data_dir: str = ".data"
    cluster: bool = False
    wait_replicas: int = checks.checked(checks.non_negative, 0)
    wait_timeout_ms: int = checks.checked(checks.positive, 1000)


@frozen
class SessionSettings:
    header: str = checks.checked(checks.header_name, "X-Session-Id")
    ttl_s: int = checks.checked(checks.positive, 2592000)


@frozen
class ClearTarget:
    """One entry of `context.compact.clear`: a string is shorthand for `{target: <string>}`."""

    SHORTHAND = "target"
    target: str = checks.checked(checks.one_of(*CLEAR_TARGETS), "tool-result")
    keep_recent: int | None = checks.checked(checks.positive, None)
    tool_filter: tuple[str, ...] = ()
    exempt_tools: tuple[str, ...] = ()


@frozen
class CompactSettings:
    """Mechanical compaction (ContextChef's `compact()`): cleared in what is sent, never in the journal."""

    clear: tuple[ClearTarget, ...] = ()


@frozen
class ServerStrategySettings:
    """The `server(fallback)` strategy: what a route's upstream is sent to manage its own context."""

    params: Mapping[str, Any] = field(default_factory=dict)
    """Merged into the body on an OpenAI-compatible route (e.g. OpenRouter's `transforms`)."""
    anthropic: Mapping[str, Any] = field(default_factory=dict, metadata={"check": checks.context_management})
    """The `context_management` an `api: anthropic` route is sent: `{edits: [{type: clear_tool_uses_20250919}]}`."""


@frozen
class HookSettings:
    before_overflow: str | None = checks.checked(checks.import_path, None)
    after_overflow: str | None = checks.checked(checks.import_path, None)


@frozen
class ToolSettings:
    """`context.tools`: the tools the proxy serves itself (the client never sees them)."""

    recall: bool = True
    """Offer `recall_context` while the session has archived spans."""
    new_context: bool = False
    max_rounds: int = checks.checked(checks.positive, 3)
    """Tool rounds the proxy runs itself within one client request."""


@frozen
class HandoffSettings:
    """`context.handoff`: a one-per-window notice that compaction is near (no block: no notice)."""

    budget_tokens: int = checks.checked(checks.positive, 4000)
    prompt: str = checks.checked(checks.prompt, HANDOFF_PROMPT)


@frozen
class ModelSettings:
    """Per-model overrides; None means "use the `context` default" (`tools` and `handoff`
    replace the default block as a whole)."""

    context_window: int | None = checks.checked(checks.positive, None)
    trigger_ratio: float | None = checks.checked(checks.ratio, None)
    strategy: tuple[str, ...] | None = checks.checked(checks.strategy, None)
    encoding: str | None = None
    tool_result_stub_threshold: int | None = checks.checked(checks.positive, None)
    compression_guidelines: tuple[str, ...] | None = None
    custom_compression_instructions: str | None = None
    builder: str | None = checks.checked(checks.import_path, None)
    use_preferred: bool | None = None
    tools: ToolSettings | None = None
    handoff: HandoffSettings | None = None
    fallbacks: tuple[str, ...] = ()
    """Models to try, in order, when this one's upstream fails before anything was relayed."""
    max_tokens: int | None = checks.checked(checks.positive, None)
    """The `max_tokens` an Anthropic upstream is sent when the request sets none (it requires one)."""
    price: PriceSettings | None = None
    """US dollars per million tokens (`prices.py`); None: the default table's, if it has the model."""
    mode: str | None = checks.checked(checks.one_of(*MODES), None)


DEFAULT_MAX_TOKENS = 4096
_NO_OVERRIDES = ModelSettings()
"""What a model without a `context.models` entry gets (asked several times a request)."""


@frozen
class ContextSettings:
    strategy: tuple[str, ...] = checks.checked(checks.strategy, ("summarize",))
    context_window: int = checks.checked(checks.positive, 128000)
    trigger_ratio: float = checks.checked(checks.ratio, 0.7)
    usage_preference: str = checks.checked(checks.one_of(*USAGE_PREFERENCES), "max")
    compression_model: str | None = None
    compression_timeout_s: float = checks.checked(checks.positive, 60.0)
    split: str = checks.checked(checks.one_of(*SPLITS), "ratio")
    preserve_ratio: float = checks.checked(checks.ratio, 0.8)
    preserve_recent_messages: int = checks.checked(checks.positive, 1)
    keep_recent: int = checks.checked(checks.non_negative, 8)
    compact_after: int = checks.checked(checks.positive, 20)
    min_shrink_ratio: float = checks.checked(checks.unit, 0.5)
    validator: str | None = None
    tool_result_stub_threshold: int | None = checks.checked(checks.positive, None)
    compression_guidelines: tuple[str, ...] = ()
    custom_compression_instructions: str | None = None
    compact: CompactSettings = field(default_factory=CompactSettings)
    server: ServerStrategySettings = field(default_factory=ServerStrategySettings)
    hooks: HookSettings = field(default_factory=HookSettings)
    builder: str | None = checks.checked(checks.import_path, None)
    use_preferred: bool = False
    tools: ToolSettings = field(default_factory=ToolSettings)
    handoff: HandoffSettings | None = None
    mode: str = checks.checked(checks.one_of(*MODES), "managed")
    """`managed`, or `shadow`: forward what the client sent, journal and count what managed
    mode would have sent (`proxy/turn/shadow.py`, `docs/savings.md`)."""
    models: Mapping[str, ModelSettings] = field(default_factory=dict)

    def for_model(self, model: str) -> ModelSettings:
        return self.models.get(model) or _NO_OVERRIDES

    def max_tokens_for(self, model: str) -> int:
        """The output limit an upstream that requires one (Anthropic's) is sent when the request has none."""
        return self.for_model(model).max_tokens or DEFAULT_MAX_TOKENS

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

    def mode_for(self, model: str) -> str:
        override = self.for_model(model).mode
        return override if override is not None else self.mode

    def price_for(self, model: str) -> PriceSettings | None:
        """The model's configured price, else the default table's, else None (no cost figures)."""
        return self.for_model(model).price or DEFAULT_PRICES.get(model)


@frozen
class GatewayKeySettings:
    """A static gateway key; its name is the tenant of its sessions."""

    name: str = checks.checked(key_name_problem)
    key: str | None = None
    key_sha256: str | None = checks.checked(checks.sha256_hex, None)
    models: tuple[str, ...] | None = checks.checked(checks.globs, None)
    rpm: int | None = checks.checked(checks.positive, None)
    tpm: int | None = checks.checked(checks.positive, None)
    budget_tokens: int | None = checks.checked(checks.positive, None)
    budget_period: str = checks.checked(checks.one_of(*BUDGET_PERIODS), "day")
    mode: str | None = checks.checked(checks.one_of(*MODES), None)
    """`managed` or `shadow` for this key's turns, over `context.mode` and the model's (`docs/savings.md`)."""


@frozen
class GatewaySettings:
    keys: tuple[GatewayKeySettings, ...] = ()
    admin_key: str = ""
    allow_anonymous: bool = False


@frozen
class RouteSettings:
    """Requests whose model matches one of `models` (shell-style globs) go to this upstream."""

    models: tuple[str, ...] = checks.checked(checks.globs)
    base_url: str = checks.checked(checks.url)
    api_key: str = ""
    timeout_s: float = checks.checked(checks.positive, 600.0)
    read_timeout_s: float = checks.checked(checks.positive, 300.0)
    connect_timeout_s: float = checks.checked(checks.positive, 10.0)
    api: str = checks.checked(checks.one_of(*UPSTREAM_APIS), "openai")


@frozen
class ResponsesSettings:
    """The Responses API door."""

    store_false: str = checks.checked(checks.one_of(*STORE_FALSE), "stateless")
    """`stateless`: a `store: false` request keeps nothing (composed under budget, not journaled);
    `manage`: such requests are managed like any other (journaled, compacted, continued by session)."""


@frozen
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    upstream: UpstreamSettings = field(default_factory=UpstreamSettings)
    redis: RedisSettings = field(default_factory=RedisSettings)
    sessions: SessionSettings = field(default_factory=SessionSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    routes: tuple[RouteSettings, ...] = ()
    responses: ResponsesSettings = field(default_factory=ResponsesSettings)
