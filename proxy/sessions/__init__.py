"""Sessions: identity (tenant, session id), the journal, and reconciling requests with it."""

from proxy.sessions.identity import Identity, requested_session, tenant_of
from proxy.sessions.journal import Turn, TurnDraft
from proxy.sessions.messages import Digests, canonical, chain_hashes, digest, leading_count, message_hash, wire
from proxy.sessions.reconcile import ROOT, Reconciled, needs_full_query, prefix_query, reconcile

__all__ = [
    "ROOT",
    "Digests",
    "Identity",
    "Reconciled",
    "Turn",
    "TurnDraft",
    "canonical",
    "chain_hashes",
    "digest",
    "leading_count",
    "message_hash",
    "needs_full_query",
    "prefix_query",
    "reconcile",
    "requested_session",
    "tenant_of",
    "wire",
]
