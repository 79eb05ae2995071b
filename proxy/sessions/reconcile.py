"""Reconcile a request with the journal: which messages are new, and where they attach.

The rules (the README repeats them for users). A request is split first: its leading
system/developer block is the request's system prompt, matched apart; what follows is
its conversation, which the rules below read.

1. The proxy hashes the conversation into a chain (see `messages.py`) and asks the
   store for the longest prefix that the journal holds on any branch.
2. Found: a full-history client. The messages after the last journal turn that ends
   inside that prefix are the new input, attached to that turn. If that turn is not
   the session's head, or the prefix ends inside a turn (an edited or regenerated
   message), the request starts a branch there; the old path stays in the journal.
   (So a named session's client that sends exactly the session's first message again
   regenerates the first answer; the same message later in a conversation is new.)
3. Not found, and the conversation holds an assistant message: the store looks for a
   run at the start of the conversation (after at most one message it does not hold:
   the app's own summary of what it trimmed) that equals a run of the session's path
   ending at a turn's end and holding one whole turn. Found: a trimming client (a
   sliding window, a message cap). The messages after the run are the new input,
   attached at the turn where the run ends (a branch if that is not the head); the
   message before the run is neither journaled nor sent.
4. Not found, session derived from the conversation (no id given): a new conversation,
   in a new session, from the root.
5. Not found, explicit session id: a delta client. The whole conversation is new input,
   attached to the head at commit time.
In every case the system prompt sent upstream is the request's own; a request without
one gets the one the session's latest turn carried. New input that holds earlier complete
exchanges (a conversation that arrives long) is then journaled as imported turns, so only
the request's own last turn stays new input (`imported.py`).
"""

from __future__ import annotations

from proxy.sessions.messages import leading_count
from proxy.store import LoadedSession
from proxy.types import Message, frozen

ROOT = -1
RECENT_PREFIXES = 64
MAX_OVERLAP_MESSAGES = 256
"""A longer conversation that matches no prefix is not looked up as a trimmed window."""


def split_leading(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    """(the leading system/developer block, the conversation); a request of system messages
    only is all conversation, so that it still has an input."""
    lead = leading_count(messages)
    if lead == len(messages):
        return [], messages
    return messages[:lead], messages[lead:]


@frozen
class Reconciled:
    new_input: list[Message]
    new_hashes: list[str]
    parent: int | None
    """The turn the new one follows; None = the head at commit time (delta clients)."""
    from_root: bool
    """True when the journal's path must not be used (rule 4)."""
    branched: bool
    trimmed: bool = False
    """Rule 3: the client trims its history; the proxy recomposes it."""


def prefix_query(chain: list[str], *, recent_only: bool) -> tuple[int, list[str]]:
    """The offset and prefix hashes to look up; with `recent_only` only the longest
    `RECENT_PREFIXES` (a full-history client usually matches all but its last message or two)."""
    offset = max(0, len(chain) - RECENT_PREFIXES) if recent_only else 0
    return offset, chain[offset:]


def needs_full_query(loaded: LoadedSession, conversation: list[Message]) -> bool:
    """A recent-only lookup that found no turn end may have missed an older one."""
    return len(conversation) > RECENT_PREFIXES and (not loaded.found or loaded.parent < 0)


def may_be_trimmed(conversation: list[Message]) -> bool:
    """Rule 3 applies only to a conversation holding an answer a journal could have."""
    return len(conversation) <= MAX_OVERLAP_MESSAGES and any(m.get("role") == "assistant" for m in conversation)


def reconcile(conversation: list[Message], hashes: list[str], loaded: LoadedSession, *, derived: bool) -> Reconciled:
    """Decide the new input and the parent; pure, so the rules are tested without Redis."""
    if loaded.found:
        start = loaded.matched
        return Reconciled(
            new_input=conversation[start:],
            new_hashes=hashes[start:],
            parent=loaded.parent,
            from_root=False,
            branched=loaded.parent != loaded.head,
            trimmed=loaded.trimmed,
        )
    if derived:
        return Reconciled(conversation, hashes, parent=ROOT, from_root=True, branched=loaded.head != ROOT)
    return Reconciled(conversation, hashes, parent=None, from_root=False, branched=False)
