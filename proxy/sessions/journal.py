"""Journal entries: a turn as it is stored and read back.

A turn is what one chat request did to a session: its new input messages, the
output message, its status, model, usage, timestamps, request id and the window it
was answered in; and `system`, the leading system/developer block the request carried
when it differed from the session's (the latest one wins in later contexts). Turns are written once (`append_turn`) and never edited; only
`completed` turns reach a later context. Each message carries its token count and
content hash, computed once when the turn is recorded, so later requests never
re-tokenize or re-hash history.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Literal

from proxy.types import JSONObject, Message, frozen

Status = Literal["completed", "failed", "canceled", "interrupted"]


@frozen(slots=True)
class Turn:
    """A journal turn as composition needs it (the stored record has more: model, usage,
    error, timestamps, request id, window; the session API reads those from the store)."""

    seq: int
    status: str
    input: tuple[Message, ...]
    output: Message | None
    tokens: tuple[int, ...]
    system: tuple[Message, ...] | None = None
    system_tokens: tuple[int, ...] = ()
    path_tokens: int | None = None
    """The tokens of the conversation through this turn's end, as a full-history client resends
    it (its path's messages, no system block); None for a turn journaled before it was kept."""
    shadow: JSONObject | None = None
    """A shadow turn's figures (`proxy/turn/shadow.py`): the window managed mode would have had."""
    path_savings: JSONObject | None = None
    """The savings totals of the path through this turn (`proxy/turn/savings.py`)."""

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def messages(self) -> tuple[Message, ...]:
        """What this turn adds to a later context: its input and, if completed, its output."""
        if self.output is None or self.status != "completed":
            return self.input
        return (*self.input, self.output)

    @classmethod
    def from_record(cls, seq: int, record: JSONObject) -> Turn:
        inputs = record.get("input", ())
        output = record.get("output")
        for message in inputs:
            message["role"] = sys.intern(message["role"])
        if output:
            output["role"] = sys.intern(output["role"])
        system, path_tokens, shadow = record.get("system"), record.get("path_tokens"), record.get("shadow")
        savings = record.get("path_savings")
        if system is None:  # most turns: the session's block is unchanged
            return cls(
                seq, record["status"], tuple(inputs), output, tuple(record.get("tokens", ())), path_tokens=path_tokens,
                shadow=shadow, path_savings=savings,
            )  # fmt: skip
        return cls(
            seq, record["status"], tuple(inputs), output, tuple(record.get("tokens", ())),
            tuple(system), tuple(record.get("system_tokens") or ()), path_tokens, shadow, savings,
        )  # fmt: skip


@dataclass
class TurnDraft:
    """A turn being answered; `record()` turns it into the stored JSON once it has ended."""

    model: str
    input: list[Message]
    input_tokens: list[int]
    input_hashes: list[str]
    encoding: str
    request_id: str
    window: str
    stream: bool
    context_tokens: int
    """The prompt tokens sent, by the proxy's count (`X-Context-Tokens`), beside the reported usage."""
    system: list[Message] | None = None
    system_tokens: list[int] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    imported: bool = False
    """An earlier exchange a request carried (`imported.py`): journaled, not answered by the proxy."""
    door: str = "chat"
    """The client API the turn came through (`proxy/doors/`)."""
    door_id: str | None = None
    """The id that API gave the answer (a Responses API response's `resp_...`)."""
    path_tokens: int | None = None
    """`Turn.path_tokens` before the output: the path through the parent plus this input."""
    client_tokens: int | None = None
    """The prompt tokens the client's request would have cost as it sent it (the savings figures)."""
    shadow: JSONObject | None = None
    """A shadow turn's figures (`proxy/turn/shadow.py`); None for a managed turn."""
    path_savings: JSONObject | None = None
    """The savings totals of the path through the parent (`proxy/turn/savings.py`); the
    recorder adds this turn's figures."""

    def record(
        self,
        *,
        status: Status,
        output: Message | None,
        output_tokens: int,
        output_hash: str | None,
        usage: JSONObject | None,
        error: JSONObject | None,
    ) -> JSONObject:
        tokens = [*self.input_tokens]
        hashes = [*self.input_hashes]
        if output is not None and output_hash is not None:
            tokens.append(output_tokens)
            hashes.append(output_hash)
        return {
            "status": status,
            "model": None if self.imported else self.model,
            "input": self.input,
            "output": output,
            "tokens": tokens,
            "hashes": hashes,
            "encoding": self.encoding,
            "usage": usage,
            "error": error,
            "request_id": self.request_id,
            "window": self.window,
            "context_tokens": self.context_tokens,
            "stream": self.stream,
            "system": self.system,
            "system_tokens": self.system_tokens if self.system else None,
            "created": self.created,
            "finished": time.time(),
            **({"imported": True} if self.imported else {}),
            **({"door": self.door} if self.door != "chat" else {}),
            **({"door_id": self.door_id} if self.door_id else {}),
            **self._counted(output_tokens if output is not None and output_hash is not None else 0),
        }

    def _counted(self, output_tokens: int) -> JSONObject:
        counted: JSONObject = {}
        if self.path_tokens is not None:
            counted["path_tokens"] = self.path_tokens + output_tokens
        if self.client_tokens is not None:
            counted["client_tokens"] = self.client_tokens
        if self.shadow is not None:
            counted["shadow"] = self.shadow
        if self.path_savings is not None:
            counted["path_savings"] = self.path_savings
        return counted
