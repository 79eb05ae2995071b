"""Prompt-cache breakpoints on a Messages body: the client's where they were, one on the summary, never over four.

The prompt is cached in Anthropic's order, tools then system then messages, up to each block
that carries `cache_control` (a breakpoint). The core keeps the client's breakpoints on the
parts, tool calls and tools they came on, and the dialect puts them back on the same blocks.
Two things are the proxy's own:

- when a window's summary stands in for older turns, its text block gets a breakpoint
  (`mark_summary`), so the compacted prefix (tools, system, summary) is cached until the
  next compaction, whatever the client marks after it;
- Anthropic refuses more than `MAX_BREAKPOINTS` (`cap_breakpoints`). A full-history client
  moves its breakpoint to the latest message each turn, while the journal keeps each message
  as it was first sent, marks included, so older messages can come back marked. The ones
  kept, in this order, until four: the latest message breakpoint, the summary's, the
  system's (last first), the tools' (last first), then the other message breakpoints, latest
  first; a top-level `cache_control` (automatic caching) takes one of the four. The others
  are removed. Where the prefix is cached does not change what it is, so the bytes of the
  prompt before the latest breakpoint stay those of the last turn.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from proxy.context.window import ARCHIVE_PREFIX
from proxy.types import JSONObject, Message

MAX_BREAKPOINTS = 4
"""Anthropic's limit of blocks with `cache_control` in one request."""


def mark_summary(messages: list[Message]) -> tuple[list[Message], JSONObject | None]:
    """`messages` (system ones already apart) with the window's summary as one text part that
    carries a breakpoint, and that breakpoint (None when there is no summary).

    The summary is the message the proxy composes right after the system block when older turns
    left the window: a user message whose text cites their archive (`context://archive/...`).
    """
    first = messages[0] if messages else None
    if first is None or first.get("role") != "user" or not isinstance(first.get("content"), str):
        return messages, None
    if ARCHIVE_PREFIX not in first["content"]:
        return messages, None
    marker: JSONObject = {"type": "ephemeral"}
    summary = {**first, "content": [{"type": "text", "text": first["content"], "cache_control": marker}]}
    return [summary, *messages[1:]], marker


def cap_breakpoints(body: JSONObject, summary: JSONObject | None) -> None:
    """Remove the breakpoints over `MAX_BREAKPOINTS` from `body`, in the order the module names.

    `summary` is the marker `mark_summary` made (found by identity: the dialect copies it by
    reference onto the summary's block)."""
    room = MAX_BREAKPOINTS - (1 if body.get("cache_control") is not None else 0)
    tools = [t for t in body.get("tools") or () if "cache_control" in t]
    system = body.get("system")
    system_blocks: list[JSONObject] = system if isinstance(system, list) else []
    systems = [b for b in system_blocks if "cache_control" in b]
    messages = list(_message_blocks(body.get("messages") or ()))
    if len(tools) + len(systems) + len(messages) <= room:
        return
    marked = [b for b in messages if b["cache_control"] is summary]
    others = [b for b in reversed(messages) if b["cache_control"] is not summary]
    ranked = [*others[:1], *marked, *reversed(systems), *reversed(tools), *others[1:]]
    dropped = {id(block) for block in ranked[max(room, 0) :]}
    if tools:
        body["tools"] = _unmarked(body["tools"], dropped)
    if systems:
        body["system"] = _unmarked(system_blocks, dropped)
    body["messages"] = [
        {**turn, "content": _unmarked(turn["content"], dropped)} if isinstance(turn["content"], list) else turn
        for turn in body["messages"]
    ]


def _unmarked(blocks: list[JSONObject], dropped: set[int]) -> list[JSONObject]:
    """`blocks` with those in `dropped` (by identity) as copies without their breakpoint, a
    tool_result's parts too: the blocks themselves may be the client's (its `anthropic` member)."""
    kept: list[JSONObject] = []
    for block in blocks:
        copy = block
        inner = block.get("content") if block.get("type") == "tool_result" else None
        if isinstance(inner, list):
            copy = {**block, "content": _unmarked(inner, dropped)}
        if id(block) in dropped:
            copy = {key: value for key, value in copy.items() if key != "cache_control"}
        kept.append(copy)
    return kept


def _message_blocks(turns: Sequence[JSONObject]) -> Iterator[JSONObject]:
    """The message blocks that carry a breakpoint, in prompt order (a tool_result's own parts too)."""
    for turn in turns:
        content = turn["content"]
        for block in content if isinstance(content, list) else ():
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for part in inner if isinstance(inner, list) else ():
                if "cache_control" in part:
                    yield part
            if "cache_control" in block:
                yield block
