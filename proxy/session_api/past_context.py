"""What a past turn sent upstream (or the next request would), rebuilt from the journal.

The session API's `GET /v1/sessions/{id}/turns/{seq}/context`: the messages come from
`proxy/sessions/replay.py`, each with its origin (leading, summary, pinned, history,
input, filled), the journal turn it was recorded in and its token count, beside the
figures a reader compares them with: the proxy's count when the turn was sent, the
usage the upstream reported, and the model's context window and compaction trigger as
the proxy holds them now. Options that change what is sent without journaling it
(mechanical clearing, preferred replies, a context builder, a before_overflow hook) are
named in `caveats` when configured: the rebuild shows the default composition.
"""

from __future__ import annotations

from proxy.config import ContextSettings
from proxy.context.tokens import TokenCounter
from proxy.session_api.replay import Replay, replay_next, replay_turn
from proxy.session_api.service import SessionNotFound
from proxy.sessions import Identity
from proxy.store import Store
from proxy.turn.windows import ModelWindows
from proxy.types import JSONObject

NEXT = "next"


class PastContexts:
    def __init__(self, store: Store, tokens: TokenCounter, windows: ModelWindows, context: ContextSettings) -> None:
        self._store = store
        self._tokens = tokens
        self._windows = windows
        self._context = context

    async def context(self, identity: Identity, seq: int | None, model: str | None) -> JSONObject:
        """Turn `seq`'s messages as sent (None: the next request's); SessionNotFound if there is no such turn."""
        dump = await self._store.read_session(identity.keys)
        if dump is None:
            raise SessionNotFound(f"no session {identity.session!r} for this API key")
        records = {t.seq: t.record for t in dump.turns}
        replay: Replay
        if seq is None:
            replay = replay_next(dump)
            record = records.get(int(dump.meta.get("head", -1)), {})
        elif seq in records:
            replay = replay_turn(dump, seq)
            record = records[seq]
        else:
            raise SessionNotFound(f"no turn {seq} in session {identity.session!r}")
        model = str(model or record.get("model") or "gpt-4o-mini")
        messages = [m.message for m in replay.messages]
        encoder = await self._tokens.encoder_for(model)
        counts = await self._tokens.count_messages(encoder, messages)
        window, trigger = self._windows.window(model), self._windows.budget(model, encoder).trigger
        sent = {} if seq is None else record
        return {
            "id": identity.session,
            "object": "session.turn.context",
            "turn": NEXT if seq is None else seq,
            "window": replay.window,
            "summarized": replay.summarized,
            "model": model,
            "messages": messages,
            "sources": [
                {"kind": m.kind, "turn": m.turn, "pinned": m.pinned, "tokens": n}
                for m, n in zip(replay.messages, counts, strict=True)
            ],
            "tokens": sum(counts),
            "context_tokens": sent.get("context_tokens"),
            "prompt_tokens": (sent.get("usage") or {}).get("prompt_tokens"),
            "context_window": window,
            "trigger": trigger,
            "caveats": self._caveats(model),
        }

    def _caveats(self, model: str) -> list[str]:
        """What the rebuilt messages cannot show for this model, as the proxy is configured now:
        options that change what is sent without leaving it in the journal."""
        context, caveats = self._context, []
        if context.compact.clear:
            caveats.append("context.compact.clear: what it cleared from the sent messages is shown uncleared")
        if context.use_preferred_for(model):
            caveats.append("use_preferred: answers replaced by preferred replies are shown as answered")
        if context.builder_for(model):
            caveats.append("a context builder chose what was sent: shown is the default composition")
        if context.hooks.before_overflow:
            caveats.append("a before_overflow hook may have replaced the history for a request")
        return caveats
