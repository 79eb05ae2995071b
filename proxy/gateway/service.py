"""The gateway as one object built at start-up: who is calling, and may they.

Outside gateway mode (no gateway key exists) a caller is who it always was: its tenant
is the hash of its own key and that key goes upstream. In gateway mode every caller
under `/v1/` and `/s/` presents a gateway key; its tenant is the key's name (so a
rotated key keeps its sessions) and the upstream gets the route's key, never the
gateway key.
"""

from __future__ import annotations

import ipaddress
import time

from proxy.config import Settings
from proxy.errors import InvalidApiKey
from proxy.gateway.admin import KeyAdmin
from proxy.gateway.limits import Limiter
from proxy.gateway.metrics import GatewayMetrics
from proxy.gateway.policy import KeyPolicy, from_settings
from proxy.gateway.registry import KeyRegistry
from proxy.sessions import tenant_of
from proxy.store import Store
from proxy.store.gateway import GatewayStore
from proxy.types import frozen


@frozen
class Principal:
    tenant: str
    """Whose sessions these are: the key's name in gateway mode, else a hash of the caller's key."""
    key: KeyPolicy | None
    """The gateway key presented; None outside gateway mode and for anonymous callers."""
    upstream_authorization: str | None
    """The Authorization the upstream may see from the caller: its own outside gateway mode, else none."""


class Gateway:
    def __init__(self, settings: Settings, store: Store) -> None:
        self._settings = settings
        gateway_store = GatewayStore(store)
        static = tuple(from_settings(key) for key in settings.gateway.keys)
        self.metrics = GatewayMetrics()
        self.registry = KeyRegistry(static, gateway_store)
        self.limiter = Limiter(gateway_store, self.metrics, time.time)
        self.admin = KeyAdmin(self.registry, gateway_store, time.time)

    def identify(self, authorization: str | None) -> Principal:
        """The caller behind this Authorization header; 401 for a missing or unknown gateway key."""
        fallback = self._settings.upstream.api_key
        if not self.registry.active:
            return Principal(tenant_of(authorization, fallback), None, authorization)
        secret = bearer(authorization)
        if not secret:
            if self._settings.gateway.allow_anonymous:
                return Principal(tenant_of(None, fallback), None, None)
            raise InvalidApiKey("this gateway needs a key: send Authorization: Bearer <gateway key>")
        policy = self.registry.lookup(secret)
        if policy is None:
            raise InvalidApiKey("incorrect gateway key provided")
        return Principal(policy.name, policy, None)


def bearer(authorization: str | None) -> str:
    """The secret of a `Bearer` Authorization header, else empty."""
    if authorization and authorization[:7].lower() == "bearer ":
        return authorization[7:].strip()
    return ""


def exposure_problem(settings: Settings, *, keys_exist: bool) -> str | None:
    """Why `serve` must not start: an upstream key anyone who reaches the proxy could spend."""
    spendable = settings.upstream.api_key or any(route.api_key for route in settings.routes)
    if not spendable or keys_exist or settings.gateway.allow_anonymous or _loopback(settings.server.host):
        return None
    return (
        f"refusing to listen on {settings.server.host} with an upstream api_key and no gateway key: anyone who "
        "can reach the proxy would spend that key; add gateway.keys (or run `context-proxy keys create NAME`), "
        "set gateway.allow_anonymous: true, or listen on 127.0.0.1"
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
