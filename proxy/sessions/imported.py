"""A conversation that arrives long: the earlier complete exchanges of a request's new input.

A request's new input (what reconciling found the journal does not hold) is usually its
last user message, perhaps with a tool exchange after it. A conversation the proxy has
never seen (an app that starts using it mid-conversation, a stateless agent's first
request) or a session that receives many turns at once carries more: earlier exchanges,
each a user message (or several) up to the assistant's final answer. They are journaled
as the turns they are, marked `imported` (no model or usage of the proxy's), so that the
strategy can compact them like any history; only the request's own turn is new input.

The rule: the request's own turn starts at its last run of user messages; everything
before it is imported if it ends with an answer (an assistant message without tool
calls), cut into exchanges after each such answer that a user message follows.
"""

from __future__ import annotations

from proxy.types import Message, frozen


@frozen
class Exchange:
    """One earlier exchange: its input messages (as `[start, end)` of the new input) and its answer at `end`."""

    start: int
    end: int


def _is_answer(message: Message) -> bool:
    return message.get("role") == "assistant" and not message.get("tool_calls")


def own_turn_start(new_input: list[Message]) -> int:
    """Where the request's own turn starts: its last run of user messages (0 when it has none,
    or when what comes before is not a finished exchange: nothing is imported then)."""
    users = [i for i, m in enumerate(new_input) if m.get("role") == "user"]
    if not users:
        return 0
    start = users[-1]
    while start > 0 and new_input[start - 1].get("role") == "user":
        start -= 1
    return start if start > 0 and _is_answer(new_input[start - 1]) else 0


def earlier_exchanges(new_input: list[Message]) -> list[Exchange]:
    """The complete exchanges before the request's own turn, oldest first."""
    own = own_turn_start(new_input)
    exchanges, start = [], 0
    for i in range(own):
        if _is_answer(new_input[i]) and (i + 1 == own or new_input[i + 1].get("role") == "user"):
            exchanges.append(Exchange(start, i))
            start = i + 1
    return exchanges
