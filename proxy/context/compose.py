"""Compose the messages for one request from the window, the recent turns and the new input.

Pure: messages in, messages out; no Redis, no HTTP. The order is always
  leading system/developer messages, the summary (if any), lifted pinned turns,
  the recent completed turns verbatim, the new input.
Turns are grouped into units that compaction may cut between: a unit starts with a
journal turn whose input opens with a user message, and takes every following turn
that continues it (tool results answering its tool calls), so an assistant message
with tool calls and its results never separate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from proxy.context.window import Window
from proxy.sessions import Turn, leading_count
from proxy.types import Message


@dataclass(frozen=True)
class Unit:
    """Consecutive journal turns that compaction keeps or evicts together."""

    turns: tuple[Turn, ...]
    messages: tuple[Message, ...]
    tokens: tuple[int, ...]

    @property
    def last_seq(self) -> int:
        return self.turns[-1].seq

    @property
    def total(self) -> int:
        return sum(self.tokens)

    @property
    def pinned(self) -> bool:
        return any(m.get("pinned") is True for m in self.messages)


@dataclass(frozen=True)
class History:
    """The session's past as the next request sees it."""

    window: Window
    units: tuple[Unit, ...]

    @cached_property
    def total(self) -> int:
        w = self.window
        return sum(w.leading_tokens) + w.summary_tokens + sum(w.pinned_tokens) + sum(u.total for u in self.units)

    def messages(self) -> list[Message]:
        w = self.window
        out = [*w.leading]
        if w.summary is not None:
            out.append(w.summary)
        out.extend(w.pinned)
        for unit in self.units:
            out.extend(unit.messages)
        return out

    def leading_hashes(self) -> list[str]:
        """Hashes of the session's leading system block (for delta-client de-duplication)."""
        if self.window.leading_hashes or not self.units:
            return list(self.window.leading_hashes)
        first = self.units[0].turns[0]
        return list(first.hashes[: leading_count(list(first.input))])


def build_history(window: Window, turns: Sequence[Turn]) -> History:
    """Group the completed turns after the window's boundary into units; the first turn's
    leading system block is lifted into the window so it is pinned from the start."""
    completed = [t for t in turns if t.completed]
    if window.boundary < 0 and completed and not window.leading:
        first = completed[0]
        lead = leading_count(list(first.input))
        if lead:
            window = Window(
                current=window.current,
                first=window.first,
                previous=window.previous,
                leading=first.input[:lead],
                leading_tokens=first.tokens[:lead],
                leading_hashes=first.hashes[:lead],
            )
            rest = Turn(
                seq=first.seq, status=first.status, model=first.model,
                input=first.input[lead:], output=first.output, tokens=first.tokens[lead:],
                hashes=first.hashes[lead:], encoding=first.encoding,
            )  # fmt: skip
            completed[0] = rest
    return History(window, tuple(group_units(completed)))


def extend_history(history: History, turns: Sequence[Turn]) -> History:
    """`history` followed by newer completed turns; regroups only the last unit, so a turn
    costs work in proportion to what is new."""
    completed = [t for t in turns if t.completed]
    if not completed:
        return history
    if not history.units:
        return build_history(history.window, completed)
    last = history.units[-1]
    return History(history.window, (*history.units[:-1], *group_units([*last.turns, *completed])))


def group_units(turns: Sequence[Turn]) -> list[Unit]:
    units: list[list[Turn]] = []
    open_calls = False
    for turn in turns:
        first_role = turn.input[0].get("role") if turn.input else None
        if not units or (first_role in ("user", "system", "developer") and not open_calls):
            units.append([turn])
        else:
            units[-1].append(turn)
        output = turn.output or {}
        open_calls = bool(output.get("tool_calls"))
    return [_unit(group) for group in units]


def _unit(turns: list[Turn]) -> Unit:
    messages: list[Message] = []
    tokens: list[int] = []
    for turn in turns:
        messages.extend(turn.messages)
        tokens.extend(turn.tokens[: len(turn.messages)])
    return Unit(tuple(turns), tuple(messages), tuple(tokens))
