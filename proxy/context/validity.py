"""Make a message list valid for the Chat Completions API before every send.

ContextChef's ensureValidHistory: tool results with no matching tool call are dropped,
a tool call with no result gets a placeholder result, and the first message after
the leading system/developer block is a user message (a placeholder user message is
inserted when it is not), and a history that dropping orphans would leave empty becomes
one placeholder user message (never `"messages": []`, which the API refuses). Pure;
returns a new list.
"""

from __future__ import annotations

from proxy.sessions import leading_count
from proxy.types import Message

MISSING_RESULT = "[tool result unavailable: it was not recorded]"
CONTINUATION = "[conversation continues]"


def ensure_valid_history(messages: list[Message]) -> list[Message]:
    paired = pair_tool_calls(messages)
    if messages and not paired:
        return [{"role": "user", "content": CONTINUATION}]
    return user_first(paired)


def pair_tool_calls(messages: list[Message]) -> list[Message]:
    """Drop tool results with no matching call; give each unanswered call a placeholder result."""
    if not any(m.get("role") == "tool" or m.get("tool_calls") for m in messages):
        return messages
    out: list[Message] = []
    pending: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in pending:
                pending.remove(call_id)
                out.append(message)
            continue
        _fill_missing(out, pending)
        out.append(message)
        if role == "assistant":
            pending = [c.get("id") for c in message.get("tool_calls") or () if c.get("id")]
    _fill_missing(out, pending)
    return out


def user_first(messages: list[Message]) -> list[Message]:
    """The first message after the leading system/developer block must be a user message."""
    lead = leading_count(messages)
    if lead < len(messages) and messages[lead].get("role") != "user":
        return [*messages[:lead], {"role": "user", "content": CONTINUATION}, *messages[lead:]]
    return messages


def _fill_missing(out: list[Message], pending: list[str]) -> None:
    for call_id in pending:
        out.append({"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT})
    pending.clear()
