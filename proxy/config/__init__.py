"""YAML plus environment -> frozen, validated settings, once, at start.

`${VAR}` and `${VAR:-default}` are replaced from the environment before parsing.
Every key is checked against the dataclasses below: an unknown key or a bad value is
refused with one line that names the key path and what is allowed. Nothing else in
the proxy reads `os.environ`.
"""

from proxy.config.checks import (
    BUDGET_PERIODS,
    CLEAR_TARGETS,
    HANDOFF_PROMPT,
    KEY_NAME,
    LOG_FORMATS,
    MAX_PROMPT_BYTES,
    MODES,
    SPLITS,
    STRATEGY_NAMES,
    USAGE_PREFERENCES,
    Check,
    StrategySpec,
    key_name_problem,
    parse_strategy_spec,
    worker_count,
)
from proxy.config.loading import config_file, expand_env, load_settings, settings_from_mapping, with_overrides
from proxy.config.prices import DEFAULT_PRICES, PriceSettings
from proxy.config.settings import (
    ClearTarget,
    CompactSettings,
    ContextSettings,
    GatewayKeySettings,
    GatewaySettings,
    HandoffSettings,
    HookSettings,
    ModelSettings,
    RedisSettings,
    RouteSettings,
    ServerSettings,
    ServerStrategySettings,
    SessionSettings,
    Settings,
    ToolSettings,
    UpstreamSettings,
)

__all__ = [
    "BUDGET_PERIODS",
    "CLEAR_TARGETS",
    "DEFAULT_PRICES",
    "HANDOFF_PROMPT",
    "KEY_NAME",
    "LOG_FORMATS",
    "MAX_PROMPT_BYTES",
    "MODES",
    "SPLITS",
    "STRATEGY_NAMES",
    "USAGE_PREFERENCES",
    "Check",
    "ClearTarget",
    "CompactSettings",
    "ContextSettings",
    "GatewayKeySettings",
    "GatewaySettings",
    "HandoffSettings",
    "HookSettings",
    "ModelSettings",
    "PriceSettings",
    "RedisSettings",
    "RouteSettings",
    "ServerSettings",
    "ServerStrategySettings",
    "SessionSettings",
    "Settings",
    "StrategySpec",
    "ToolSettings",
    "UpstreamSettings",
    "config_file",
    "expand_env",
    "key_name_problem",
    "load_settings",
    "parse_strategy_spec",
    "settings_from_mapping",
    "with_overrides",
    "worker_count",
]
