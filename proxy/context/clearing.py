"""Mechanical compaction (ContextChef's `compact()`): strip content at no model cost.

Applied to what is sent, after the history is composed and before the budget is checked
(the journal keeps everything); `context.compact.clear` lists the targets:
- `tool-result`: a tool result's content becomes `CLEARED`; it keeps its `tool_call_id`.
  `keep_recent: N` keeps the N most recent clearable results of the history (at least 1);
  `tool_filter` limits clearing to those tools, `exempt_tools` never clears those (it
  wins over `tool_filter`). The new input's tool results are never cleared (the model
  is about to read them) and do not count.
- `thinking`: the reasoning fields of assistant messages (`reasoning_content`,
  `reasoning`, `reasoning_details`, `thinking`, `redacted_thinking`) are dropped.
- `reasoning-tags`: `<think>...</think>` blocks in assistant text are removed.
  These two apply to assistant messages of the new input too (`clear_new_input`).
Pinned messages, and every message of a unit that holds one, are never cleared; nor are
the leading block, the summary and lifted pinned turns. Pure and deterministic: the same
history always clears the same way, so the prefix sent stays byte-stable between turns
up to the newest result that `keep_recent` let go of.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from proxy.config import CompactSettings
from proxy.context.compose import History, Unit
from proxy.types import Message, frozen

CLEARED = "[Old tool result content cleared]"
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_details", "thinking", "redacted_thinking")
_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)

Position = tuple[int, int]
"""(unit index, message index in the unit)."""


@frozen
class ToolResultRule:
    keep_recent: int | None
    tool_filter: frozenset[str]
    exempt: frozenset[str]

    def clears(self, tool: str | None) -> bool:
        if tool in self.exempt:
            return False
        return not self.tool_filter or tool in self.tool_filter


@frozen
class ClearRules:
    tool_results: tuple[ToolResultRule, ...] = ()
    thinking: bool = False
    reasoning_tags: bool = False

    @classmethod
    def from_settings(cls, compact: CompactSettings) -> ClearRules | None:
        """The rules `context.compact` configures; None when it clears nothing."""
        if not compact.clear:
            return None
        tool_rules = tuple(
            ToolResultRule(rule.keep_recent, frozenset(rule.tool_filter), frozenset(rule.exempt_tools))
            for rule in compact.clear
            if rule.target == "tool-result"
        )
        targets = {rule.target for rule in compact.clear}
        return cls(tool_rules, "thinking" in targets, "reasoning-tags" in targets)


def clear_history(history: History, rules: ClearRules, count: Callable[[Message], int]) -> History:
    """`history` with the rules applied; the same object when nothing changes. Cleared
    messages are counted again (`count`), so the budget sees what is sent."""
    changes: dict[Position, Message] = {}
    open_units = [i for i, unit in enumerate(history.units) if not unit.pinned]
    for rule in rules.tool_results:
        for position in _cleared_results(history, open_units, rule):
            message = changes.get(position) or history.units[position[0]].messages[position[1]]
            changes[position] = {**message, "content": CLEARED}
    if rules.thinking or rules.reasoning_tags:
        for u in open_units:
            for m, original in enumerate(history.units[u].messages):
                if original.get("role") != "assistant":
                    continue
                message = _stripped(changes.get((u, m)) or original, rules)
                if message is not original:
                    changes[(u, m)] = message
    return rewritten(history, changes, count)


def clear_new_input(messages: list[Message], rules: ClearRules) -> list[Message]:
    """The new input as sent: reasoning stripped from its assistant messages (a full-history
    client may send them back); its tool results are left alone."""
    if not (rules.thinking or rules.reasoning_tags):
        return messages
    return [
        _stripped(m, rules) if m.get("role") == "assistant" and m.get("pinned") is not True else m for m in messages
    ]


def rewritten(history: History, changes: Mapping[Position, Message], count: Callable[[Message], int]) -> History:
    """`history` with the messages at `changes` replaced (and counted again)."""
    if not changes:
        return history
    units = list(history.units)
    for u in sorted({u for u, _ in changes}):
        unit = units[u]
        messages, tokens = list(unit.messages), list(unit.tokens)
        for m, message in ((m, msg) for (cu, m), msg in changes.items() if cu == u):
            messages[m] = message
            tokens[m] = count(message)
        units[u] = Unit(unit.turns, tuple(messages), tuple(tokens), sum(tokens))
    return History.of(history.window, tuple(units))


def _cleared_results(history: History, open_units: list[int], rule: ToolResultRule) -> list[Position]:
    """The clearable tool results of one rule, oldest first, less the `keep_recent` newest."""
    names: dict[str, str] = {}
    clearable: list[Position] = []
    for u in open_units:
        for m, message in enumerate(history.units[u].messages):
            for call in message.get("tool_calls") or ():
                names[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
            if message.get("role") != "tool":
                continue
            if rule.clears(names.get(str(message.get("tool_call_id")))):
                clearable.append((u, m))
    if rule.keep_recent is not None:
        return clearable[: -max(1, rule.keep_recent)]
    return clearable


def _stripped(message: Message, rules: ClearRules) -> Message:
    out = message
    if rules.thinking and any(key in message for key in REASONING_FIELDS):
        out = {k: v for k, v in message.items() if k not in REASONING_FIELDS}
    if rules.reasoning_tags:
        content = out.get("content")
        if isinstance(content, str) and _THINK.search(content):
            out = {**out, "content": _THINK.sub("", content)}
        elif isinstance(content, list) and any(_is_thinking_part(p) for p in content):
            parts = [{**p, "text": _THINK.sub("", p["text"])} if _is_thinking_part(p) else p for p in content]
            out = {**out, "content": parts}
    return out


def _is_thinking_part(part: object) -> bool:
    return isinstance(part, dict) and isinstance(part.get("text"), str) and bool(_THINK.search(part["text"]))
