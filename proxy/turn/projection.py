"""What a session's history looks like when it is sent, before any compaction.

The journal keeps every turn as it was; what goes upstream may differ in two
configured ways, applied in this order: with `context.use_preferred` a turn's latest
preferred reply (feedback) stands in for its output, and `context.compact.clear`
strips content mechanically (`proxy/context/clearing.py`). Both count what they
change, so the budget sees what is sent. `sent_input` is the new input as sent.
"""

from __future__ import annotations

from collections.abc import Mapping

from proxy.config import ContextSettings
from proxy.context.clearing import ClearRules, Position, clear_history, clear_new_input, rewritten
from proxy.context.compose import History
from proxy.context.tokens import Encoder, count_message
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


def with_preferred(history: History, preferred: Mapping[int, str], encoder: Encoder) -> History:
    """`history` with each turn's output content replaced by its latest preferred reply."""
    changes: dict[Position, Message] = {}
    for u, unit in enumerate(history.units):
        position = 0
        for turn in unit.turns:
            position += len(turn.messages)
            text = preferred.get(turn.seq)
            if text is not None and turn.completed and turn.output is not None:
                changes[(u, position - 1)] = {**turn.output, "content": text}
    return rewritten(history, changes, lambda m: count_message(encoder, m))
