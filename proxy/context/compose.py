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

from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cached_property
from itertools import chain

import orjson

from proxy.context.model import has_marks
from proxy.context.validity import CONTINUATION, ensure_valid_history, pair_tool_calls
from proxy.context.window import Window
from proxy.sessions import Turn, leading_count, message_hash, wire
from proxy.sessions.messages import LEADING_ROLES
from proxy.types import Message, frozen


@frozen(slots=True)
class Unit:
    """Consecutive journal turns that compaction keeps or evicts together."""

    turns: tuple[Turn, ...]
    messages: tuple[Message, ...]
    tokens: tuple[int, ...]
    total: int

    @classmethod
    def of(cls, turns: tuple[Turn, ...]) -> Unit:
        if len(turns) == 1:  # most units: a user turn and its answer
            messages_of_one = turns[0].messages
            tokens_of_one = turns[0].tokens[: len(messages_of_one)]
            return cls(turns, messages_of_one, tokens_of_one, sum(tokens_of_one))
        messages: list[Message] = []
        tokens: list[int] = []
        for turn in turns:
            messages.extend(turn.messages)
            tokens.extend(turn.tokens[: len(turn.messages)])
        return cls(turns, tuple(messages), tuple(tokens), sum(tokens))

    @property
    def last_seq(self) -> int:
        return self.turns[-1].seq

    @property
    def pinned(self) -> bool:
        return any(m.get("pinned") is True for m in self.messages)

    @property
    def paired(self) -> list[Message]:
        """The unit's messages as sent: tool calls paired with results, no proxy markers."""
        return _paired(list(self.messages))


def _paired(messages: list[Message]) -> list[Message]:
    return [wire(m) for m in pair_tool_calls(messages)]


def _settled_json(units: Sequence[Unit]) -> bytes:
    """The units' paired messages as comma-joined JSON, in one serializer call.

    A unit boundary never falls inside an open tool call, so pairing the units together
    is the same as pairing each alone.
    """
    if not units:
        return b""
    messages = [m for unit in units for m in unit.messages]
    return orjson.dumps(_paired(messages))[1:-1]


@frozen
class History:
    """The session's past as the next request sees it.

    Built with `of` (work in proportion to all units) or `extend_history` (in
    proportion to what is new): the unit totals and the serialized settled units are
    carried along, so an ongoing conversation never re-walks its whole history.
    """

    window: Window
    units: tuple[Unit, ...]
    units_tokens: int
    message_count: int
    settled_json: tuple[bytes, ...]
    """Every unit but the last, as sent, serialized: reused byte for byte on every request.
    In chunks (comma-joined messages each), each smaller than the one before (`_with_chunk`):
    a turn copies little more than what it settled, amortized, and a request joins a few
    chunks, not one per turn (`compose_json`, `forward.upstream_body`)."""
    settled_marks: bool = False
    """Whether a settled chunk may hold another API's marks (`has_marks`, once per chunk)."""

    @classmethod
    def of(cls, window: Window, units: tuple[Unit, ...]) -> History:
        settled = _settled_json(units[:-1])
        count = sum(len(u.messages) for u in units)
        chunks = (settled,) if settled else ()
        return cls(window, units, sum(u.total for u in units), count, chunks, has_marks(settled))

    @cached_property
    def total(self) -> int:
        w = self.window
        return sum(w.leading_tokens) + w.summary_tokens + sum(w.pinned_tokens) + self.units_tokens

    def messages(self) -> list[Message]:
        w = self.window
        out = [*w.leading]
        if w.summary is not None:
            out.append(w.summary)
        out.extend(w.pinned)
        for unit in self.units:
            out.extend(unit.messages)
        return out

    def with_leading(self, leading: Sequence[Message], tokens: Sequence[int], hashes: Sequence[str]) -> History:
        """The same past under another leading system/developer block (the request's own)."""
        return replace(self, window=self.window.with_leading(tuple(leading), tuple(tokens), tuple(hashes)))


def compose_messages(history: History, new_input: list[Message]) -> list[Message]:
    """The messages sent upstream: history + new input, made valid, without proxy markers."""
    return [wire(m) for m in composed(history, new_input)]


def composed(history: History, new_input: list[Message]) -> list[Message]:
    """`compose_messages` before the proxy's markers are stripped: the history's own message
    objects (so a caller can tell where each came from) plus any the validity rules added."""
    return ensure_valid_history([*history.messages(), *new_input])


def compose_json(history: History, new_input: list[Message]) -> bytes:
    """`compose_messages` as a JSON array, reusing the cached bytes of every settled unit."""
    return compose_screened(history, new_input)[0]


def compose_screened(history: History, new_input: list[Message]) -> tuple[bytes, bool]:
    """`compose_json`, and whether it is known to hold none of another API's marks (`has_marks`:
    the settled units were screened once as they settled, the rest is screened here).

    A unit boundary never falls inside an open tool call, so each unit but the last is
    valid on its own; the last unit is validated together with the new input, which may
    answer its tool calls. Only the window head and that tail are serialized per request.
    """
    w = history.window
    head = [wire(m) for m in (*w.leading, *((w.summary,) if w.summary else ()), *w.pinned)]
    tail_source = [*(history.units[-1].messages if history.units else ()), *new_input]
    tail = [wire(m) for m in pair_tool_calls(tail_source)]
    settled = (u.paired for u in history.units[:-1])
    first = _first_after_leading(chain([head], settled, [tail]))
    if first is None and not head and not history.settled_json and tail_source:
        return orjson.dumps(compose_messages(history, new_input)), False  # only orphans: a placeholder goes
    if first is not None and first[1].get("role") != "user":
        if first[0] > len(head):
            return orjson.dumps(compose_messages(history, new_input)), False
        head.insert(first[0], {"role": "user", "content": CONTINUATION})
    head_parts, tail_parts = [orjson.dumps(m) for m in head], [orjson.dumps(m) for m in tail]
    unmarked = not history.settled_marks and not any(has_marks(p) for p in (*head_parts, *tail_parts))
    return json_array([*head_parts, *history.settled_json, *tail_parts]), unmarked


def json_array(parts: Sequence[bytes]) -> bytes:
    """`[` parts comma-separated `]`, copied once (a history's settled bytes can be large)."""
    chunks = [b"["]
    for part in parts:
        chunks += (part, b",")
    if parts:
        chunks.pop()
    chunks.append(b"]")
    return b"".join(chunks)


def _first_after_leading(parts: Iterable[list[Message]]) -> tuple[int, Message] | None:
    """The global index and message of the first non-system/developer message."""
    index = 0
    for part in parts:
        for message in part:
            if message.get("role") not in LEADING_ROLES:
                return index, message
            index += 1
    return None


def _latest_leading(window: Window, turns: Sequence[Turn]) -> Window:
    """The window under the leading block the latest of `turns` carried, if any carried one."""
    for turn in reversed(turns):
        if turn.system is not None:
            hashes = tuple(message_hash(m) for m in turn.system)
            return window.with_leading(turn.system, turn.system_tokens, hashes)
    return window


def build_history(window: Window, turns: Sequence[Turn]) -> History:
    """Group the completed turns after the window's boundary into units. The leading
    system block is the one the latest turn carried (`Turn.system`); a turn journaled
    before turns carried it has its block at the start of its input, lifted into the
    window so it is pinned from the start."""
    completed = [t for t in turns if t.completed]
    window = _latest_leading(window, completed)
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
                leading_hashes=tuple(message_hash(m) for m in first.input[:lead]),
            )
            rest = Turn(first.seq, first.status, first.input[lead:], first.output, first.tokens[lead:])
            completed[0] = rest
    return History.of(window, tuple(group_units(completed)))


def extend_history(history: History, turns: Sequence[Turn]) -> History:
    """`history` followed by newer completed turns; regroups only the last unit, so a turn
    costs work in proportion to what is new."""
    completed = [t for t in turns if t.completed]
    if not completed:
        return history
    if not history.units:
        return build_history(history.window, completed)
    last = history.units[-1]
    regrouped = group_units([*last.turns, *completed])
    newly_settled = _settled_json(regrouped[:-1])
    settled = _with_chunk(history.settled_json, newly_settled) if newly_settled else history.settled_json
    return History(
        _latest_leading(history.window, completed),
        (*history.units[:-1], *regrouped),
        history.units_tokens - last.total + sum(u.total for u in regrouped),
        history.message_count - len(last.messages) + sum(len(u.messages) for u in regrouped),
        settled,
        history.settled_marks or has_marks(newly_settled),
    )


def _with_chunk(chunks: tuple[bytes, ...], new: bytes) -> tuple[bytes, ...]:
    """`chunks` then `new`, the last ones merged while one is no larger than the one after it.
    Like a binary counter's digits: n turns' chunks of one size come to at most log2(n) + 1,
    and each byte is copied at most that many times over the session's life."""
    kept = list(chunks)
    while kept and len(kept[-1]) <= len(new):
        new = kept.pop() + b"," + new
    return (*kept, new)


def group_units(turns: Sequence[Turn]) -> list[Unit]:
    units: list[list[Turn]] = []
    open_calls = False
    for turn in turns:
        first_role = turn.input[0].get("role") if turn.input else None
        if not units or ((first_role == "user" or first_role in LEADING_ROLES) and not open_calls):
            units.append([turn])
        else:
            units[-1].append(turn)
        output = turn.output or {}
        open_calls = bool(output.get("tool_calls"))
    return [Unit.of(tuple(group)) for group in units]
