"""`server(fallback)`: for upstreams that manage their own context (ContextChef's `server`).

One portable config: what `server(x)` does depends on the route the model goes to
(`on_route`). On an `api: anthropic` route with `context.server.anthropic` set, the proxy
sends that as Anthropic's server-side `context_management` (in the core body's `anthropic`
extras; the dialect adds the beta header it needs); on an OpenAI-compatible route with
`context.server.params` set, those are merged into the body, e.g. OpenRouter's
`{"transforms": ["middle-out"]}`. Either way the proxy compacts nothing and checks no
window: the history goes as it is (`with_server_params`: keys the client set win). On a
route with nothing configured for its API, `server(x)` is x, client-side. When the upstream
still refuses the prompt as too long, the request is compacted with the strategy
`without_server` makes (every `server(x)` replaced by x, run inline) and sent once more.

In a chain (`[server(summarize), reset]`) a server part makes the whole chain
server-managed, and the refusal's fallback is the chain of fallbacks (`[summarize,
reset]`). `background(server(x))` is `server(x)`: after a refusal there is no answer to
compact behind, so the fallback runs before the resend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.compaction.strategies.background import Background
from proxy.compaction.strategies.base import CompactionInput, CompactionResult, Strategy
from proxy.compaction.strategies.chain import Chain
from proxy.config import ServerStrategySettings
from proxy.context.budget import Budget
from proxy.context.compose import History
from proxy.types import JSONObject


class Server:
    def __init__(self, fallback: Strategy, params: Mapping[str, Any]) -> None:
        self.fallback = fallback
        self.params = params
        self.name = f"server({fallback.name})"

    def due(self, history: History, budget: Budget, tokens: int) -> bool:
        return False

    async def compact(self, data: CompactionInput) -> CompactionResult:
        return CompactionResult.unchanged(self.name, data, "the upstream manages its own context")


def _parts(strategy: Strategy) -> tuple[Strategy, ...]:
    if isinstance(strategy, Chain):
        return tuple(p for s in strategy.strategies for p in _parts(s))
    if isinstance(strategy, Background):
        return _parts(strategy.inner)
    return (strategy,)


def server_params(strategy: Strategy) -> Mapping[str, Any] | None:
    """The params to merge into the upstream body when `strategy` is server-managed, else None."""
    if isinstance(strategy, Server):
        return strategy.params
    if not isinstance(strategy, (Chain, Background)):  # a plain strategy (most requests'): no walk
        return None
    for part in _parts(strategy):
        if isinstance(part, Server):
            return part.params
    return None


def without_server(strategy: Strategy) -> Strategy:
    """The strategy that compacts after a server-managed request was refused as too long."""
    if isinstance(strategy, Server):
        return strategy.fallback
    if isinstance(strategy, Chain):
        return Chain([without_server(s) for s in strategy.strategies])
    if isinstance(strategy, Background) and server_params(strategy.inner) is not None:
        return without_server(strategy.inner)
    return strategy


def on_route(strategy: Strategy, api: str, server: ServerStrategySettings) -> Strategy:
    """`strategy` as it runs on a route whose wire API is `api`: each `server(x)` part sends what
    `server` configures for that API (`context.server.anthropic` as `context_management` on
    `anthropic`, `context.server.params` on any other), or is x where nothing is configured.
    A strategy with no server part comes back as it is."""
    if server_params(strategy) is None:
        return strategy
    if api == "anthropic":
        params: Mapping[str, Any] = {"anthropic": {"context_management": server.anthropic}} if server.anthropic else {}
    else:
        params = server.params
    return _placed(strategy, params)


def _placed(strategy: Strategy, params: Mapping[str, Any]) -> Strategy:
    if isinstance(strategy, Server):
        return Server(strategy.fallback, params) if params else strategy.fallback
    if isinstance(strategy, Chain):
        return Chain([_placed(s, params) for s in strategy.strategies])
    if isinstance(strategy, Background):
        return Background(_placed(strategy.inner, params))
    return strategy


def with_server_params(body: JSONObject, params: Mapping[str, Any]) -> JSONObject:
    """The core body with a server-managed strategy's params merged in: the client's own keys
    win, one level down in the `anthropic` extras too (a Messages client's `metadata` and the
    configured `context_management` both go)."""
    merged = {**params, **body}
    ours, theirs = params.get("anthropic"), body.get("anthropic")
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        merged["anthropic"] = {**ours, **theirs}
    return merged
