"""The handoff notice (ContextChef's handoff budget): a warning that compaction is near.

Pure. When the headroom (the trigger minus the size of the context about to be sent,
measured as the trigger measures it: messages, with the last usage fed back) is at most
`budget_tokens`, one request per window carries the notice at its tail, appended to the
last user message, with `{n_remaining}` replaced by the headroom, rounded and clamped
at 0. The notice is added to what goes upstream only: it is never journaled, so no
later context holds it.
"""

from __future__ import annotations

from proxy.config import HandoffSettings
from proxy.types import Message

PLACEHOLDER = "{n_remaining}"


def headroom(trigger: int, size: int) -> int:
    """Tokens left before the trigger; `size` is the context as the trigger measures it."""
    return trigger - size


def due(settings: HandoffSettings | None, room: int) -> bool:
    return settings is not None and room <= settings.budget_tokens


def notice_text(prompt: str, room: float) -> str:
    return prompt.replace(PLACEHOLDER, str(max(0, round(room))))


def with_notice(messages: list[Message], notice: str) -> list[Message]:
    """`messages` with the notice appended to the last user message (a text part for
    multi-part content); unchanged when there is no user message."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = [*content, {"type": "text", "text": notice}]
        else:
            content = f"{content}\n\n{notice}" if content else notice
        return [*messages[:index], {**message, "content": content}, *messages[index + 1 :]]
    return messages
