"""Every Redis key the proxy uses, built in one place.

A session's keys share the hash tag `{tenant:session}` so that a Redis Cluster keeps
them in one slot (the Lua scripts touch several of them at once). A tenant's keys (its
session index, its derived-session index) share the hash tag `{t:tenant}`, another slot:
a tenant's listing reads one slot, and no script ever needs keys of two slots.
"""

from __future__ import annotations

from proxy.types import frozen

PREFIX = "cp"
LOCK_PREFIX = f"{PREFIX}:lock"
FORCE_COMPACTION = "force_compaction"
"""meta field: the window id in which the model asked for a new context (`new_context`)."""
HANDOFF_PREFIX = "handoff:"
"""meta fields `handoff:<window id>`: the handoff notice went out in that window."""
LEGACY_SESSION_INDEX = f"{PREFIX}:sessions"
"""The one global index of earlier versions; adopted into the tenants' indexes at start."""
TENANT_INDEX_PATTERN = f"{PREFIX}:{{t:*}}:sessions"
"""Matches every tenant's session index (`TenantKeys.sessions`), for a scan of all tenants."""


def tenant_of_index(key: str) -> str:
    """The tenant whose session index `key` is (the inverse of `TenantKeys.sessions`)."""
    return key[len(PREFIX) + 4 : -len("}:sessions")]


_SESSION_KEYS = ("meta", "turns", "links", "chain", "events", "archive", "ends")


@frozen
class SessionKeys:
    tenant: str
    session: str

    @property
    def _base(self) -> str:
        return f"{PREFIX}:{{{self.tenant}:{self.session}}}"

    @property
    def name(self) -> str:
        """`tenant:session`: the session's name across tenants (the background runner's job key)."""
        return f"{self.tenant}:{self.session}"

    @property
    def index(self) -> str:
        """The tenant's session index (another slot than the session's keys)."""
        return TenantKeys(self.tenant).sessions

    @property
    def meta(self) -> str:
        """hash: seq counter, head, boundary, window state, last usage, breaker count, and the
        feedback on turns (`feedback:<seq>`: a JSON list; `preferred`: seq -> latest preferred reply), and
        the context tools' flags (`FORCE_COMPACTION`, `HANDOFF_PREFIX` + window id)."""
        return f"{self._base}:meta"

    @property
    def turns(self) -> str:
        """hash: seq -> turn JSON (never rewritten)."""
        return f"{self._base}:turns"

    @property
    def links(self) -> str:
        """hash: seq -> "parent depth chain_hash message_hashes" (what the Lua scripts walk)."""
        return f"{self._base}:links"

    @property
    def chain(self) -> str:
        """hash: chain hash of a message prefix -> "e<seq>" (a turn ends there) or "i<seq>"."""
        return f"{self._base}:chain"

    @property
    def events(self) -> str:
        """list: journal entries that are not turns (compactions), JSON."""
        return f"{self._base}:events"

    @property
    def archive(self) -> str:
        """hash: archive id -> evicted span JSON."""
        return f"{self._base}:archive"

    @property
    def ends(self) -> str:
        """hash: a completed turn's output hash -> its seq (how a trimming client's window is found)."""
        return f"{self._base}:ends"

    @property
    def compaction_lock(self) -> str:
        return f"{LOCK_PREFIX}:{{{self.tenant}:{self.session}}}:compaction"

    def all(self) -> list[str]:
        """The seven session keys, in the order `append_turn.lua` and `save_window.lua` take them."""
        base = self._base
        return [f"{base}:{name}" for name in _SESSION_KEYS]


@frozen
class TenantKeys:
    """Keys of one tenant (one hash tag, so one cluster slot per tenant)."""

    tenant: str

    @property
    def _base(self) -> str:
        return f"{PREFIX}:{{t:{self.tenant}}}"

    @property
    def sessions(self) -> str:
        """zset: session id -> last used (unix seconds, to the millisecond)."""
        return f"{self._base}:sessions"

    @property
    def derived_ends(self) -> str:
        """hash: a completed turn's output hash -> its derived session id."""
        return f"{self._base}:derived-ends"

    @property
    def derived_ages(self) -> str:
        """zset: the output hashes of `derived_ends` by the time they were written."""
        return f"{self._base}:derived-ages"
