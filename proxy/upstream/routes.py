"""Which upstream serves a model: the first route whose globs match it, else `upstream`.

Each route has its own `UpstreamClient` (its own pool, key and timeouts), built once at
start-up and closed at stop. Pass-through calls route by their JSON body's `model`;
a call that names no model goes to `upstream`.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from proxy.config import RouteSettings, UpstreamSettings
from proxy.upstream.client import UpstreamClient

_MEMO_LIMIT = 1024


class Routes:
    def __init__(self, default: UpstreamClient, routes: list[tuple[tuple[str, ...], UpstreamClient]]) -> None:
        self.default = default
        self._routes = routes
        self._memo: dict[str, UpstreamClient] = {}

    @classmethod
    def create(cls, upstream: UpstreamSettings, routes: tuple[RouteSettings, ...]) -> Routes:
        def client(route: UpstreamSettings | RouteSettings) -> UpstreamClient:
            return UpstreamClient(
                base_url=route.base_url,
                api_key=route.api_key,
                timeout_s=route.timeout_s,
                read_timeout_s=route.read_timeout_s,
                connect_timeout_s=route.connect_timeout_s,
                max_connections=upstream.max_connections,
                api=route.api,
            )

        default = client(upstream)
        built = [(route.models, client(route)) for route in routes]
        return cls(default, built)

    def client_for(self, model: str | None) -> UpstreamClient:
        if model is None or not self._routes:
            return self.default
        client = self._memo.get(model)
        if client is None:
            client = next((c for globs, c in self._routes if any(fnmatchcase(model, g) for g in globs)), self.default)
            if len(self._memo) < _MEMO_LIMIT:
                self._memo[model] = client
        return client

    async def close(self) -> None:
        for _, client in self._routes:
            await client.close()
        await self.default.close()
