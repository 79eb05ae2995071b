"""The journal as the session API and the CLI show it: turns, branches, windows, savings."""

from __future__ import annotations

from typing import Any

from proxy.context.window import FIRST_WINDOW
from proxy.session_api.savings import Prices, Savings, saved_tokens
from proxy.store import SessionDump
from proxy.store.feedback import feedback_by_turn
from proxy.types import JSONObject

_RECORD_FIELDS = (
    "status",
    "model",
    "system",
    "input",
    "output",
    "usage",
    "context_tokens",
    "client_tokens",
    "cost_usd",
    "saved_cost_usd",
    "error",
    "request_id",
    "window",
    "rounds",
    "door_id",
    "shadow",
)


def session_view(session: str, dump: SessionDump, prices: Prices) -> JSONObject:
    """The journal as shown; `prices` prices the summarizer calls in the savings totals."""
    meta = dump.meta
    completed = {t.seq for t in dump.turns if t.record.get("status") == "completed"}
    parents = {t.parent for t in dump.turns if t.seq in completed}
    by_seq = {t.seq: t for t in dump.turns}
    head = int(meta.get("head", -1))
    branches = []
    for leaf in sorted(completed - parents):
        path = []
        cur = leaf
        while cur >= 0:
            path.append(cur)
            cur = by_seq[cur].parent
        branches.append({"head": leaf, "active": leaf == head, "turns": path[::-1]})
    feedback = feedback_by_turn(meta)
    turns = [
        {
            "seq": t.seq,
            "parent": t.parent,
            "depth": t.depth,
            **{k: t.record.get(k) for k in _RECORD_FIELDS},
            "door": t.record.get("door") or "chat",
            "imported": bool(t.record.get("imported")),
            "tokens": sum(t.record.get("tokens") or ()),
            "saved_tokens": saved_tokens(t.record),
            "created": t.record.get("created"),
            "finished": t.record.get("finished"),
            "feedback": feedback.get(t.seq, []),
        }
        for t in dump.turns
    ]
    windows: list[dict[str, Any]] = [{"id": FIRST_WINDOW, "evicted_turns": [], "summary": None}]
    for event in dump.events:
        if event.get("type") in ("compaction", "clear"):
            windows.append({k: event.get(k) for k in ("strategy", "evicted_turns", "summary", "archive", "created")})
            windows[-1]["id"] = event.get("window")
    current = windows[-1]["id"] if windows else FIRST_WINDOW
    first = next((w["id"] for w in reversed(windows) if w.get("strategy") == "clear"), FIRST_WINDOW)
    return {
        "id": session,
        "object": "session",
        "created": int(meta.get("created", 0)),
        "updated": int(meta.get("updated", 0)),
        "head": head,
        "turns": turns,
        "branches": branches,
        "windows": windows,
        "window": {
            "current": current,
            "previous": windows[-2]["id"] if len(windows) > 1 and current != first else None,
            "first": first,
        },
        "events": dump.events,
        "totals": {
            "turns": len(dump.turns),
            "completed": len(completed),
            "prompt_tokens": sum(((t.record.get("usage") or {}).get("prompt_tokens") or 0) for t in dump.turns),
            "completion_tokens": sum(((t.record.get("usage") or {}).get("completion_tokens") or 0) for t in dump.turns),
            **Savings().add((t.record for t in dump.turns), dump.events, prices).as_json(),
        },
    }
