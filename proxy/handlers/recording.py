"""Journaling a turn exactly once, at the right moment, even when the request is cancelled.

A turn is recorded when its answer is complete but before the client sees the end of
it (the last SSE event, or the JSON body), so a client's next request always finds it.
A request that ends any other way (the client left, the upstream failed) is recorded
as it ended. The write runs in a task the request cannot cancel, and shutdown waits
for such writes before it closes the store.
"""

from __future__ import annotations

from aiohttp import web

from proxy.context.tokens import Encoder, count_message
from proxy.handlers.conversation import Conversation
from proxy.handlers.relay import Outcome
from proxy.keys import SETTINGS, STORE, TOKENS, WRITES
from proxy.sessions import TurnDraft, message_hash


class TurnRecorder:
    def __init__(
        self, app: web.Application, conversation: Conversation, draft: TurnDraft, *, sent_tokens: int, encoder: Encoder
    ) -> None:
        self._app = app
        self._conversation = conversation
        self._draft = draft
        self._sent_tokens = sent_tokens
        self._encoder = encoder
        self._recorded = False

    async def record(self, outcome: Outcome) -> None:
        """Journal the turn with this outcome; later calls do nothing."""
        if self._recorded:
            return
        self._recorded = True
        await self._app[WRITES].run(self._write(outcome))

    async def _write(self, outcome: Outcome) -> None:
        app, draft = self._app, self._draft
        output = outcome.output
        record = draft.record(
            status=outcome.status,  # type: ignore[arg-type]
            output=output,
            output_tokens=count_message(self._encoder, output) if output else 0,
            output_hash=message_hash(output) if output else None,
            usage=outcome.usage,
            error=outcome.error,
        )
        feedback = None
        prompt_tokens = (outcome.usage or {}).get("prompt_tokens")
        if outcome.status == "completed" and isinstance(prompt_tokens, int):
            feedback = {"prompt": prompt_tokens, "local": self._sent_tokens, "window": draft.window}
            app[TOKENS].observe_usage(draft.model, reported=prompt_tokens, local=self._sent_tokens)
        await app[STORE].append_turn(
            self._conversation.keys,
            record,
            parent=self._conversation.reconciled.parent,
            completed=outcome.status == "completed",
            hashes=record["hashes"],
            ttl_s=app[SETTINGS].sessions.ttl_s,
            usage=feedback,
        )
