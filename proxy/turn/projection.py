"""What a session's history looks like when it is sent, before any compaction.

The journal keeps every turn as it was; what goes upstream may differ in two
configured ways, applied in this order: with `context.use_preferred` a turn's latest
preferred reply (feedback) stands in for its output, and `context.compact.clear`
strips content mechanically (`proxy/context/clearing.py`). Both count what they
change, so the budget sees what is sent. `sent_input` is the new input as sent.
"""

from __future__ import annotations

from proxy.config import ContextSettings
from proxy.context.clearing import ClearRules, clear_history, clear_new_input
from proxy.context.compose import History
from proxy.context.tokens import Encoder, count_message
from proxy.session_api.feedback import with_preferred
from proxy.store import SessionKeys, Store
from proxy.types import Message


async def sent_history(
    history: History, *, store: Store, keys: SessionKeys, context: ContextSettings, model: str, encoder: Encoder
) -> History:
    if context.use_preferred_for(model):
        history = with_preferred(history, await store.preferred_replies(keys), encoder)
    rules = ClearRules.from_settings(context.compact)
    if rules is not None:
        history = clear_history(history, rules, lambda m: count_message(encoder, m))
    return history


def sent_input(new_input: list[Message], context: ContextSettings) -> list[Message]:
    rules = ClearRules.from_settings(context.compact)
    return new_input if rules is None else clear_new_input(new_input, rules)
