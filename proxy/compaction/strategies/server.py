"""`server(fallback)`: for upstreams that manage their own context (ContextChef's `server`).

The proxy compacts nothing and checks no window: the history goes as it is, with
`context.server.params` merged into the upstream body (keys the client set win), e.g.
OpenRouter's `{"transforms": ["middle-out"]}`. When the upstream still refuses the
prompt as too long, the request is compacted with the strategy `without_server` makes
(every `server(x)` replaced by x, run inline) and sent once more.

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
from proxy.context.budget import Budget
from proxy.context.compose import History


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
