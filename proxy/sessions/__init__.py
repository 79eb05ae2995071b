"""Sessions: identity (tenant, session id), the journal, and reconciling requests with it."""

from proxy.sessions.identity import Identity, identify, tenant_of
from proxy.sessions.journal import Turn, TurnDraft
from proxy.sessions.messages import canonical, chain_hashes, leading_count, message_hash, wire
from proxy.sessions.reconcile import ROOT, Reconciled, prefix_query, reconcile

__all__ = [
    "ROOT",
    "Identity",
    "Reconciled",
    "Turn",
    "TurnDraft",
    "canonical",
    "chain_hashes",
    "identify",
    "leading_count",
    "message_hash",
    "prefix_query",
    "reconcile",
    "tenant_of",
    "wire",
]
