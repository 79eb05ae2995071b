"""The context window's durable state: lineage, boundary, summary, lifted pinned messages.

A window is what the model sees of a session's past. It changes only when an
overflow lands: then the turns up to `boundary` leave (archived, still in the
journal) and `summary` stands in for them, while the leading system/developer
messages and any pinned turns they held are kept verbatim in `leading`/`pinned`.
Stored as JSON in the session's meta, so every replica and every restart composes
the same prefix byte for byte until the next overflow.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from proxy.types import JSONObject, Message, frozen

FIRST_WINDOW = "win_0"
"""The id of every session's first window; `win_N` is the lineage's (N+1)th."""
ARCHIVE_PREFIX = "context://archive/"


def archive_uri(archive_id: str) -> str:
    """How a summary cites an evicted span (its archive id is the window that evicted it)."""
    return ARCHIVE_PREFIX + archive_id


@frozen
class Window:
    current: str = FIRST_WINDOW
    first: str = FIRST_WINDOW
    previous: str | None = None
    boundary: int = -1
    """Seq of the last journal turn that left the window (-1: none has)."""
    summary: Message | None = None
    summary_tokens: int = 0
    anchor: str | None = None
    """anchored strategy: the anchor document the summary message carries."""
    leading: tuple[Message, ...] = ()
    leading_tokens: tuple[int, ...] = ()
    leading_hashes: tuple[str, ...] = ()
    pinned: tuple[Message, ...] = ()
    pinned_tokens: tuple[int, ...] = ()
    evicted_units: int = 0
    """How many units (a user message and all that answers it) have left across the lineage;
    the `turns` strategy counts in these."""

    def with_leading(self, leading: tuple[Message, ...], tokens: tuple[int, ...], hashes: tuple[str, ...]) -> Window:
        """The same window with another leading system/developer block (the latest one wins)."""
        return replace(self, leading=leading, leading_tokens=tokens, leading_hashes=hashes)

    @property
    def next_id(self) -> str:
        return f"win_{int(self.current.rsplit('_', 1)[1]) + 1}"

    def advance(self, **changes: Any) -> Window:
        """The next window in the lineage: {first, previous, current} moves one step."""
        return replace(self, previous=self.current, current=self.next_id, **changes)

    def to_json(self) -> JSONObject:
        return {
            "current": self.current,
            "first": self.first,
            "previous": self.previous,
            "boundary": self.boundary,
            "summary": self.summary,
            "summary_tokens": self.summary_tokens,
            "anchor": self.anchor,
            "leading": list(self.leading),
            "leading_tokens": list(self.leading_tokens),
            "leading_hashes": list(self.leading_hashes),
            "pinned": list(self.pinned),
            "pinned_tokens": list(self.pinned_tokens),
            "evicted_units": self.evicted_units,
        }

    @classmethod
    def from_json(cls, data: JSONObject | None) -> Window:
        if not data:
            return cls()
        return cls(
            current=data["current"],
            first=data.get("first", FIRST_WINDOW),
            previous=data.get("previous"),
            boundary=int(data.get("boundary", -1)),
            summary=data.get("summary"),
            summary_tokens=int(data.get("summary_tokens", 0)),
            anchor=data.get("anchor"),
            leading=tuple(data.get("leading", ())),
            leading_tokens=tuple(data.get("leading_tokens", ())),
            leading_hashes=tuple(data.get("leading_hashes", ())),
            pinned=tuple(data.get("pinned", ())),
            pinned_tokens=tuple(data.get("pinned_tokens", ())),
            evicted_units=int(data.get("evicted_units") or data.get("evicted_turns") or 0),
        )
