"""Custom context (june's `ContextBuilder`): `context.builder: "pkg.mod:fn"`, per model too.

For the sessions it is configured on, the builder replaces the strategy's projection:
it is called (sync or async) with keyword arguments `session` (the session id),
`turns` (every earlier turn of the session's path, all statuses, oldest first, each a
dict: `seq`, `status`, `input`, `output`, `model`, `created`, `feedback`) and
`new_input` (the request's new messages), and returns the messages that go between
the session's leading system/developer block and the new input. The proxy still makes
them valid (tool pairs, a user message first), counts them, and refuses with
`context_length_exceeded` what cannot fit; nothing is compacted. A builder that raises
(or returns something that is not a list of messages) fails the turn, as in june: the
request answers 500 `context_builder_failed` and the turn is journaled `failed` with that
error (its input kept, never in a later context). It reads the session's whole
journal on every request: a cost in proportion to the session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from proxy.config import ContextSettings
from proxy.context.compose import History
from proxy.context.custom import check_messages, given_history, lineage_only
from proxy.context.tokens import Encoder, count_messages
from proxy.errors import ContextBuilderFailed
from proxy.plugins import call, import_callable
from proxy.store import SessionDump, SessionKeys, Store
from proxy.store.feedback import feedback_by_turn
from proxy.types import JSONObject, Message


class Builders:
    """The configured builders, imported once at start-up (a bad path is a config error)."""

    def __init__(self, context: ContextSettings) -> None:
        paths = {context.builder, *(m.builder for m in context.models.values())} - {None}
        self._context = context
        self._loaded: dict[str, Callable[..., Any]] = {
            path: import_callable(path, "context.builder") for path in paths if path is not None
        }

    def for_model(self, model: str) -> Callable[..., Any] | None:
        path = self._context.builder_for(model)
        return self._loaded[path] if path else None


async def build_context(
    builder: Callable[..., Any],
    *,
    store: Store,
    keys: SessionKeys,
    history: History,
    parent: int | None,
    from_root: bool,
    new_input: list[Message],
    encoder: Encoder,
) -> History:
    """The history the builder chose, after the session's leading block."""
    dump = None if from_root else await store.read_session(keys)
    turns = earlier_turns(dump, parent) if dump is not None else []
    try:
        value = await call(builder, session=keys.session, turns=turns, new_input=orjson.loads(orjson.dumps(new_input)))
        messages = check_messages(value, "context.builder")
    except Exception as exc:  # a user-supplied function may raise anything
        raise ContextBuilderFailed(f"context.builder failed: {exc.__class__.__name__}: {exc}") from exc
    window = lineage_only(history.window, keep_leading=True)
    return given_history(window, messages, count_messages(encoder, messages))


def earlier_turns(dump: SessionDump, parent: int | None) -> list[JSONObject]:
    """The turns of the path that ends at `parent` (None: the head), with the turns that did
    not complete off that path, oldest first, each with its feedback."""
    by_seq = {t.seq: t for t in dump.turns}
    cur = int(dump.meta.get("head", -1)) if parent is None else parent
    path: set[int] = set()
    while cur >= 0 and cur in by_seq:
        path.add(cur)
        cur = by_seq[cur].parent
    feedback = feedback_by_turn(dump.meta)
    chosen = [
        t for t in dump.turns
        if t.seq in path or (t.record.get("status") != "completed" and (t.parent in path or t.parent < 0))
    ]  # fmt: skip
    return [_turn(t.seq, t.record, feedback) for t in sorted(chosen, key=lambda t: t.seq)]


def _turn(seq: int, record: JSONObject, feedback: Mapping[int, list[JSONObject]]) -> JSONObject:
    keys = ("status", "input", "output", "model", "created")
    return {"seq": seq, **{k: record.get(k) for k in keys}, "feedback": feedback.get(seq, [])}
