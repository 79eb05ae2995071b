"""What the model saw for a past turn, rebuilt from the journal (no prompt is stored).

Every turn records the window it was answered in; every landed compaction's event (and
every clear's) names the window it made, the window it started from, the turns it evicted and the
summary that stands in for them. That is enough to rebuild each window as the proxy
held it, and from it the messages a turn sent, with the functions that composed them:
  - a window's state = the history its compaction saw (its base window, or a fresh one
    when the base's boundary is not on the path to this window's boundary: the
    compaction ran on a branch that left before it; the path up to the request that
    compacted; that request's own system block) + the evicted units' pinned turns
    lifted + the summary, as the strategies build it (`lift_pinned`, `Window.advance`);
  - a turn's context = its window if the window's boundary is on the turn's path
    (else a fresh window of the same lineage, as `load_context` does for such a
    branch), the completed turns of the path after the boundary, the turn's own system
    block if it carried one, its input, made valid (`compose.composed`).
Pure: a session dump in, tagged messages out.

Not exact for a turn whose own compaction did not land (another landed first, which the
per-session compaction claim leaves possible only once a claim timed out): it answered
in a window id that the landed compaction names, so it is shown with the landed summary.
"""

from __future__ import annotations

from itertools import takewhile

from proxy.compaction.strategies.base import lift_pinned
from proxy.context.compose import History, build_history, composed
from proxy.context.window import FIRST_WINDOW, Window
from proxy.sessions.journal import Turn
from proxy.sessions.messages import message_hash, wire
from proxy.store import SessionDump, StoredTurn
from proxy.types import JSONObject, Message, frozen

WINDOW_EVENTS = ("compaction", "clear")
"""Journal events that start a window: a landed compaction, and a clear (a fresh lineage
that keeps only the leading block and the pinned turns: a window without a summary)."""

LEADING, SUMMARY, PINNED, HISTORY, INPUT, FILLED = "leading", "summary", "pinned", "history", "input", "filled"
"""Where a sent message came from: the session's leading system block, the window's
summary, a pinned turn lifted out of an evicted span, a recent turn, the turn's own new
input, or a message the validity rules added (a placeholder tool result or user turn)."""


@frozen
class SentMessage:
    kind: str
    turn: int | None
    """The journal turn the message was recorded in (None for a summary or a filled one)."""
    message: Message
    pinned: bool
    """The client marked this very message `pinned: true` (a marker the proxy strips before sending)."""


@frozen
class Replay:
    seq: int
    window: str
    summarized: bool
    """Whether the window's summary applied to this turn's path."""
    messages: tuple[SentMessage, ...]


def replay_turn(dump: SessionDump, seq: int) -> Replay:
    """The messages turn `seq` sent upstream, each tagged with its origin. KeyError if no such turn."""
    journal = _Journal(dump)
    target = journal.stored[seq]
    window_id = str(target.record.get("window") or FIRST_WINDOW)
    return _replay(journal, target.parent, window_id, journal.turns[seq])


def replay_next(dump: SessionDump) -> Replay:
    """What the next request on the session's head would send before its new input (seq -1)."""
    journal = _Journal(dump)
    return _replay(journal, int(dump.meta.get("head", -1)), dump.meta.get("window_id", FIRST_WINDOW), None)


def _replay(journal: _Journal, parent: int, window_id: str, turn: Turn | None) -> Replay:
    """`turn` (None: a next request with no input of its own) as composed on the path to `parent`."""
    seq, new_input = (turn.seq, turn.input) if turn is not None else (-1, ())
    path = journal.path_to(parent)
    window = journal.window(window_id)
    if window is not None and window.boundary in path:
        after = path[path.index(window.boundary) + 1 :]
    else:
        window, after = Window(current=window_id), path
    history = _with_system(build_history(window, [journal.turns[s] for s in after]), turn)
    held = history.window
    tags: dict[int, tuple[str, int | None]] = {}
    for kind, messages in ((LEADING, held.leading), (PINNED, held.pinned)):
        for message in messages:
            tags[id(message)] = (kind, journal.origin.get(id(message)))
    if held.summary is not None:
        tags[id(held.summary)] = (SUMMARY, None)
    for unit in history.units:
        for message in unit.messages:
            tags[id(message)] = (HISTORY, journal.origin.get(id(message)))
    for message in new_input:
        tags[id(message)] = (INPUT, seq)
    sent = tuple(
        SentMessage(*tags.get(id(m), (FILLED, None)), message=wire(m), pinned=m.get("pinned") is True)
        for m in composed(history, list(new_input))
    )
    return Replay(seq, window_id, held.summary is not None, sent)


class _Journal:
    """A session's turns by seq, their tree, and its windows rebuilt on demand."""

    def __init__(self, dump: SessionDump) -> None:
        self.stored: dict[int, StoredTurn] = {t.seq: t for t in dump.turns}
        self.turns: dict[int, Turn] = {t.seq: Turn.from_record(t.seq, t.record) for t in dump.turns}
        self.origin: dict[int, int] = {
            id(m): turn.seq
            for turn in self.turns.values()
            for m in (*(turn.system or ()), *turn.input, turn.output)
            if m is not None
        }
        self.by_request: dict[str, StoredTurn] = {
            str(t.record.get("request_id")): t for t in dump.turns if t.record.get("request_id")
        }
        self.events: dict[str, JSONObject] = {
            str(e["window"]): e for e in dump.events if e.get("type") in WINDOW_EVENTS
        }
        self._windows: dict[str, Window | None] = {}

    def path_to(self, seq: int) -> list[int]:
        """The seqs from the root to `seq` (inclusive), oldest first; empty for -1."""
        path = []
        while seq >= 0:
            path.append(seq)
            seq = self.stored[seq].parent
        return path[::-1]

    def window(self, window_id: str) -> Window | None:
        """The window as its compaction landed it; None for the first window (or one no event made)."""
        if window_id not in self._windows:
            self._windows[window_id] = self._build(self.events.get(window_id))
        return self._windows[window_id]

    def _build(self, event: JSONObject | None) -> Window | None:
        """The window a compaction landed, rebuilt as the compaction built it: the history it
        saw (its base window, the path up to the request that compacted, that request's
        own system block), the evicted units' pinned turns lifted, the summary."""
        if event is None:
            return None
        evicted = [int(s) for s in event.get("evicted_turns") or ()]
        base_id = str(event.get("from_window") or FIRST_WINDOW)
        base = self.window(base_id)
        if base is None or (evicted and base.boundary not in self.path_to(evicted[-1])):
            base = Window(current=base_id)
        trigger = self.by_request.get(str(event.get("request_id")))
        seen = self.path_to(trigger.parent) if trigger is not None else evicted
        if base.boundary in seen:
            seen = seen[seen.index(base.boundary) + 1 :]
        request = self.turns[trigger.seq] if trigger is not None else None
        history = _with_system(build_history(base, [self.turns[s] for s in seen]), request)
        gone = set(evicted)
        units = tuple(takewhile(lambda unit: all(t.seq in gone for t in unit.turns), history.units))
        summary = event.get("summary")
        return lift_pinned(history.window, units).advance(
            boundary=evicted[-1] if evicted else base.boundary,
            summary={"role": "user", "content": summary} if isinstance(summary, str) else None,
        )


def _with_system(history: History, turn: Turn | None) -> History:
    """The history under the leading block a request carried, when it carried its own."""
    if turn is None or turn.system is None:
        return history
    return history.with_leading(turn.system, turn.system_tokens, [message_hash(m) for m in turn.system])
