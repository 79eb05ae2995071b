"""How a turn's answer ended, as the relay saw it and the journal records it."""

from __future__ import annotations

from proxy.types import JSONObject, Message, frozen


@frozen
class Outcome:
    status: str
    """`completed`, `failed`, `canceled` or `interrupted` (`status.py`)."""
    output: Message | None = None
    """The assistant message, in the core's normal form."""
    usage: JSONObject | None = None
    error: JSONObject | None = None
    finish_reason: str | None = None
