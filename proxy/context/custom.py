"""A history made of messages someone else chose: a context builder's, or the replacement
a `before_overflow` hook returned.

They go as one unit after the window's leading block (if any is kept), so the usual
steps still apply: the messages are made valid with the new input (tool pairs, a user
message first), counted, and refused with `context_length_exceeded` when they cannot
fit. Such a history is never compacted (it has no journal turns to cut between).
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.context.compose import History, Unit
from proxy.context.window import Window
from proxy.types import Message


def given_history(window: Window, messages: Sequence[Message], tokens: Sequence[int]) -> History:
    """`messages` (with their token counts) as the history after `window`'s leading block."""
    unit = Unit(turns=(), messages=tuple(messages), tokens=tuple(tokens), total=sum(tokens))
    return History.of(window, (unit,) if messages else ())


def lineage_only(window: Window, *, keep_leading: bool) -> Window:
    """`window`'s ids (and leading block, if kept), without its summary or pinned messages."""
    if keep_leading:
        return Window(
            current=window.current, first=window.first, previous=window.previous,
            leading=window.leading, leading_tokens=window.leading_tokens, leading_hashes=window.leading_hashes,
        )  # fmt: skip
    return Window(current=window.current, first=window.first, previous=window.previous)


def check_messages(value: object, source: str) -> list[Message]:
    """`value` as a list of chat messages; `TypeError` naming `source` when it is not one."""
    if not isinstance(value, list):
        raise TypeError(f"{source} returned {type(value).__name__}, not a list of messages")
    for index, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TypeError(f"{source} returned a list whose item {index} is not a message with a role")
    return value
