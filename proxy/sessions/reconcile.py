"""Reconcile a request with the journal: which messages are new, and where they attach.

The rules (the README repeats them for users):

1. The proxy hashes the request's messages into a chain (see `messages.py`) and asks
   the store for the longest prefix that extends past the leading system/developer
   block and that the journal holds on any branch.
2. Found: a full-history client. The messages after the last journal turn that ends
   inside that prefix are the new input, attached to that turn. If that turn is not
   the session's head, or the prefix ends inside a turn (an edited or regenerated
   message), the request starts a branch there; the old path stays in the journal.
3. Not found, session derived from the conversation (no id given): the client sends
   the whole conversation, so this is a new conversation from the root.
4. Not found, explicit session id: a delta client. All messages are new input,
   attached to the head at commit time; a leading system/developer block identical to
   the session's own is not repeated.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.sessions.messages import leading_count
from proxy.store import LoadedSession
from proxy.types import Message

ROOT = -1


@dataclass(frozen=True)
class Reconciled:
    new_input: list[Message]
    new_hashes: list[str]
    parent: int | None
    """The turn the new one follows; None = the head at commit time (delta clients)."""
    from_root: bool
    """True when the journal's path must not be used (rule 3)."""
    branched: bool


RECENT_PREFIXES = 64


def prefix_query(hashes_chain: list[str], messages: list[Message], *, recent_only: bool) -> tuple[int, list[str]]:
    """The offset and prefix hashes to look up: only prefixes longer than the leading block,
    and with `recent_only` only the longest `RECENT_PREFIXES` of them (a full-history client
    usually matches all but its last message or two)."""
    offset = leading_count(messages)
    if recent_only:
        offset = max(offset, len(messages) - RECENT_PREFIXES)
    return offset, hashes_chain[offset:]


def needs_full_query(loaded: LoadedSession, messages: list[Message]) -> bool:
    """A recent-only lookup that found no turn end may have missed an older one."""
    truncated = len(messages) - leading_count(messages) > RECENT_PREFIXES
    return truncated and (not loaded.found or loaded.parent < 0)


def reconcile(
    messages: list[Message],
    hashes: list[str],
    loaded: LoadedSession,
    *,
    derived: bool,
    session_leading: list[str],
) -> Reconciled:
    """Decide the new input and the parent; pure, so the rules are tested without Redis."""
    if loaded.found:
        start = loaded.matched
        return Reconciled(
            new_input=messages[start:],
            new_hashes=hashes[start:],
            parent=loaded.parent,
            from_root=False,
            branched=loaded.parent != loaded.head,
        )
    if derived:
        return Reconciled(messages, hashes, parent=ROOT, from_root=True, branched=loaded.head != ROOT)
    lead = leading_count(messages)
    if lead and hashes[:lead] == session_leading:
        return Reconciled(messages[lead:], hashes[lead:], parent=None, from_root=False, branched=False)
    return Reconciled(messages, hashes, parent=None, from_root=False, branched=False)
