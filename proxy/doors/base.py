"""What a door is: the core's answer written in its client's API.

A door's handler (one module per API beside this one) parses its API's request into the
core's `ChatRequest`, runs the turn, and hands the relay (`proxy/handlers/relay.py`) a `Door`
that writes the core's answer (a Chat Completions answer, whatever the upstream spoke) in
its API: a JSON body, an event stream, an error. The relay reads and journals the answer
the same way for every door.
"""

from __future__ import annotations

from typing import Protocol

from proxy.errors import ProxyError
from proxy.turn.outcome import Outcome
from proxy.types import JSONObject
from proxy.upstream import SSEEvent


class StreamWriter(Protocol):
    def start(self) -> bytes:
        """Events that open the stream, sent with its headers (empty for Chat Completions)."""
        ...

    def event(self, event: SSEEvent, chunk: JSONObject | None) -> bytes:
        """One upstream event (its parsed chunk, when it is one) in this API; may be empty."""
        ...

    async def end(self, outcome: Outcome) -> bytes:
        """The closing events, once the turn is journaled with `outcome` (completed, or failed
        with the upstream's error event)."""
        ...

    def error(self, exc: ProxyError) -> bytes:
        """The event that ends a cut, stalled or unjournaled stream so that the client's SDK raises."""
        ...


class Door(Protocol):
    name: str
    """The API's name on the turn record, in metrics and the inspector: chat, responses, messages."""

    async def body(self, body: bytes, outcome: Outcome) -> bytes:
        """A completed answer's JSON body (`body`: the completion as the upstream's dialect read it)."""
        ...

    def error_body(self, status: int, body: bytes) -> bytes:
        """An error answer (OpenAI's error JSON, from the upstream or the proxy) in this API's shape."""
        ...

    def stream(self) -> StreamWriter: ...
