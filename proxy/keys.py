"""Typed application keys: every shared resource the handlers reach, by type."""

from __future__ import annotations

from aiohttp import web

from proxy.config import Settings
from proxy.context.cache import PathCache
from proxy.context.limits import ModelLimits
from proxy.context.runner import CompactionRunner
from proxy.context.strategies import StrategyRegistry
from proxy.context.tokens import TokenCounter
from proxy.metrics import Metrics
from proxy.pending import PendingWrites
from proxy.store import EmbeddedRedis, Store
from proxy.upstream import UpstreamClient

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", Store)
EMBEDDED = web.AppKey("embedded", EmbeddedRedis)
UPSTREAM = web.AppKey("upstream", UpstreamClient)
TOKENS = web.AppKey("tokens", TokenCounter)
METRICS = web.AppKey("metrics", Metrics)
STRATEGIES = web.AppKey("strategies", StrategyRegistry)
RUNNER = web.AppKey("runner", CompactionRunner)
PATHS = web.AppKey("paths", PathCache)
WRITES = web.AppKey("writes", PendingWrites)
LIMITS = web.AppKey("limits", ModelLimits)

ROUTE_MODEL = web.RequestKey("model", str)
