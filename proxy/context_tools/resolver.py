"""Answering the proxy's own tool calls for one session.

`recall_context(uri)` reads the span archived under `context://archive/<window id>`
from this session only (the store keys carry the caller's tenant), so an unknown or
another session's URI gives `[not found]`. The span comes back as a transcript, cut
to the room the request has left in the model's window. `new_context()` flags the
session so that its next request is composed after a forced compaction.
"""

from __future__ import annotations

import re

import orjson

from proxy.compaction.prompts import flatten
from proxy.context.tokens import Encoder
from proxy.context.window import ARCHIVE_PREFIX
from proxy.context_tools.tools import NEW_CONTEXT, NEW_CONTEXT_ANSWER, NOT_FOUND, RECALL
from proxy.store import SessionKeys, Store
from proxy.types import JSONObject

_ARCHIVE_URI = re.compile(re.escape(ARCHIVE_PREFIX) + r"(win_\d+)")
_CALL_TOKENS = 40
"""A margin for what a round adds besides the result text (the call, the message framing)."""
TRUNCATED = "\n[truncated: the rest does not fit the room left in this request]"
NO_ROOM = "[not returned: no room is left in the context window for it]"


class ToolResolver:
    """Answers calls for one request; `room` is the tokens it may still add to the window."""

    def __init__(self, store: Store, keys: SessionKeys, window_id: str, encoder: Encoder, room: int) -> None:
        self._store = store
        self._keys = keys
        self._window_id = window_id
        self._encoder = encoder
        self._room = room

    async def answer(self, call: JSONObject) -> str:
        """The tool result for one of the proxy's calls (the caller routed it here by name)."""
        function = call.get("function") or {}
        name = function.get("name")
        if name == NEW_CONTEXT:
            await self._store.request_compaction(self._keys, self._window_id)
            return self._spend(NEW_CONTEXT_ANSWER)
        if name == RECALL:
            return self._spend(await self._recall(function.get("arguments")))
        raise ValueError(f"not a proxy tool: {name!r}")

    async def _recall(self, arguments: object) -> str:
        try:
            parsed = orjson.loads(arguments) if isinstance(arguments, str) else None
        except orjson.JSONDecodeError:
            parsed = None
        uri = parsed.get("uri") if isinstance(parsed, dict) else None
        match = _ARCHIVE_URI.fullmatch(uri.strip()) if isinstance(uri, str) else None
        if match is None:
            return NOT_FOUND
        span = await self._store.read_archive(self._keys, match.group(1))
        if not span:
            return NOT_FOUND
        return flatten(span)

    def _spend(self, text: str) -> str:
        """`text` cut to the room left (and the room reduced by what it costs)."""
        room = self._room - _CALL_TOKENS
        tokens = len(self._encoder.encode_ordinary(text))
        if tokens <= room:
            self._room = room - tokens
            return text
        if room <= len(self._encoder.encode_ordinary(TRUNCATED)):
            return NO_ROOM
        keep = int(len(text) * 0.9 * (room - len(self._encoder.encode_ordinary(TRUNCATED))) / tokens)
        self._room = 0
        return text[:keep] + TRUNCATED
