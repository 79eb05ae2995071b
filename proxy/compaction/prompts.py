"""What the compression model is asked, and how its answer is cleaned.

The summarize prompt is ContextChef's: an `<analysis>` scratchpad (stripped) then a
`<summary>` with five sections. Tool traffic is role-flattened into plain text, so
the compression request is valid whatever tool calls the span held.
"""

from __future__ import annotations

import re

import orjson

from proxy.types import Message

SUMMARY_SECTIONS = ("Task Overview", "Current State", "Important Discoveries", "Next Steps", "Context to Preserve")

SUMMARIZE_INSTRUCTIONS = (
    "You are compressing the earlier part of a conversation so that it can continue in a smaller context "
    "window. First think in an <analysis> block: what was asked, what was done, what was decided, what is "
    "still open. Then write a <summary> block with exactly these five sections, as markdown headings:\n"
    + "\n".join(f"## {s}" for s in SUMMARY_SECTIONS)
    + "\nKeep names, numbers, file paths, identifiers, decisions and the user's stated preferences exactly. "
    "Do not invent anything. Write the summary in the language of the conversation. It must be much "
    "shorter than the conversation."
)

ANCHOR_INSTRUCTIONS = (
    "You maintain an anchor document: a running, structured record of a long conversation (goals, "
    "decisions, facts, open questions). You are given the current anchor and the part of the "
    "conversation that is now leaving the context window. Return the complete updated anchor inside "
    "<summary> tags, merging the new information into it; keep everything in the current anchor that is "
    "still true. Keep it concise."
)

SUMMARY_PREFIX = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The earlier part is summarized below; the conversation continues after it."
)
TURNS_PREFIX = "Summary of the earlier conversation:"
ANCHOR_PREFIX = "Anchor document of the earlier conversation (it continues after this):"


def flatten(messages: list[Message]) -> str:
    """Render messages as a plain transcript; tool calls and results become text."""
    lines = []
    for message in messages:
        role = message.get("role", "user")
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", f"[{p.get('type')}]")) for p in content if isinstance(p, dict))
        if role == "tool":
            lines.append(f"[tool result {message.get('tool_call_id', '')}]: {content or ''}")
            continue
        if content:
            lines.append(f"[{role}]: {content}")
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(f"[{role} called tool {function.get('name')} ({call.get('id')})]: {function.get('arguments')}")
    return "\n\n".join(lines)


def summarize_request(evicted: list[Message], previous: str | None) -> list[Message]:
    parts = []
    if previous:
        parts.append(f"Summary of what came before this part:\n{previous}")
    parts.append(f"Conversation to compress:\n{flatten(evicted)}")
    return [{"role": "system", "content": SUMMARIZE_INSTRUCTIONS}, {"role": "user", "content": "\n\n".join(parts)}]


def anchor_request(evicted: list[Message], anchor: str | None) -> list[Message]:
    current = anchor or "(empty: this is the first part to leave the window)"
    body = f"Current anchor:\n{current}\n\nLeaving the window now:\n{flatten(evicted)}"
    return [{"role": "system", "content": ANCHOR_INSTRUCTIONS}, {"role": "user", "content": body}]


def clean_summary(text: str) -> str:
    """Drop the <analysis> scratchpad; keep the <summary> body if tagged."""
    text = re.sub(r"<analysis>.*?</analysis>", "", text, flags=re.DOTALL)
    match = re.search(r"<summary>(.*?)(?:</summary>|$)", text, flags=re.DOTALL)
    if match:
        text = match.group(1)
    return text.strip()


def summary_message(prefix: str, body: str, archive_uri: str) -> Message:
    content = f"{prefix}\n\n{body}\n\n(The full text of the summarized part is archived at {archive_uri}.)"
    return {"role": "user", "content": content}


def span_chars(messages: list[Message]) -> int:
    return sum(len(orjson.dumps(m.get("content"))) for m in messages)
