"""The session store: the only package that imports `redis`."""

from proxy.store.embedded import EmbeddedRedis, EmbeddedServerError, running_server_url
from proxy.store.names import SessionKeys, TenantKeys
from proxy.store.redis_store import Archive, LoadedSession, SessionDump, Store, StoredTurn

__all__ = [
    "Archive",
    "EmbeddedRedis",
    "EmbeddedServerError",
    "LoadedSession",
    "SessionDump",
    "SessionKeys",
    "Store",
    "StoredTurn",
    "TenantKeys",
    "running_server_url",
]
