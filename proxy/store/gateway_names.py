"""Every Redis key of the team gateway, built in one place.

Each gateway key's counters share the hash tag `{name}`, so every limits script touches
one Redis Cluster slot. The registry of run-time keys is one small hash with its own tag
`{registry}`: listing keys and creating or revoking one touch that slot only, and the
hot path never reads it (each replica keeps a copy, refreshed when its version moves).
"""

from __future__ import annotations

from proxy.store.names import PREFIX
from proxy.types import frozen

GATEWAY_PREFIX = f"{PREFIX}:gw"
REGISTRY = f"{GATEWAY_PREFIX}:{{registry}}:keys"
"""hash: key name -> the key's policy JSON (its secret only as a sha256)."""
REGISTRY_VERSION = f"{GATEWAY_PREFIX}:{{registry}}:version"
"""counter: bumped by every create and revoke."""


@frozen
class GatewayKeys:
    """The counters of one gateway key, by its name."""

    name: str

    @property
    def _base(self) -> str:
        return f"{GATEWAY_PREFIX}:{{{self.name}}}"

    @property
    def rpm(self) -> str:
        """sorted set: one member per request admitted in the rolling minute, scored by its ms time."""
        return f"{self._base}:rpm"

    @property
    def tpm(self) -> str:
        """hash: unix second -> tokens admitted in it (reserved, then corrected by usage)."""
        return f"{self._base}:tpm"

    def day(self, stamp: str) -> str:
        """hash: requests, tokens, refused in one UTC day (`2026-11-30`)."""
        return f"{self._base}:day:{stamp}"

    def month(self, stamp: str) -> str:
        """hash: requests, tokens, refused in one UTC month (`2026-11`)."""
        return f"{self._base}:month:{stamp}"
