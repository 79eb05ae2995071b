"""What the compression model is asked, and how its answer is cleaned.

The summarize prompt is ContextChef's: an `<analysis>` scratchpad (stripped) then a
`<summary>` with five sections. Tool traffic is role-flattened into plain text, so
the compression request is valid whatever tool calls the span held.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson

from proxy.types import Message, frozen

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


@frozen
class CompressionPrompt:
    """The compression options (per model too): `custom_compression_instructions` replaces
    a strategy's default instructions, `compression_guidelines` are lines added to them,
    and tool results over `tool_result_stub_threshold` tokens reach the compression model
    as a one-line stub."""

    guidelines: tuple[str, ...] = ()
    custom_instructions: str | None = None
    stub_threshold: int | None = None

    def instructions(self, default: str) -> str:
        text = self.custom_instructions or default
        if self.guidelines:
            text += "\nAlso follow these guidelines:\n" + "\n".join(f"- {line}" for line in self.guidelines)
        return text

    def stubbed(self, messages: list[Message], count_text: Callable[[str], int]) -> list[Message]:
        """`messages` with each tool result over the threshold replaced by a stub naming its tool and size."""
        if self.stub_threshold is None:
            return messages
        names: dict[str, str] = {}
        out = []
        for message in messages:
            for call in message.get("tool_calls") or ():
                names[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
            content = message.get("content")
            if message.get("role") == "tool" and isinstance(content, str):
                tokens = count_text(content)
                if tokens > self.stub_threshold:
                    name = names.get(str(message.get("tool_call_id")), "a tool")
                    stub = f"[{name} returned {tokens} tokens; omitted before summarization]"
                    message = {**message, "content": stub}
            out.append(message)
        return out


DEFAULT_PROMPT = CompressionPrompt()


def summarize_request(evicted: list[Message], previous: str | None, prompt: CompressionPrompt) -> list[Message]:
    parts = []
    if previous:
        parts.append(f"Summary of what came before this part:\n{previous}")
    parts.append(f"Conversation to compress:\n{flatten(evicted)}")
    instructions = prompt.instructions(SUMMARIZE_INSTRUCTIONS)
    return [{"role": "system", "content": instructions}, {"role": "user", "content": "\n\n".join(parts)}]


def anchor_request(evicted: list[Message], anchor: str | None, prompt: CompressionPrompt) -> list[Message]:
    current = anchor or "(empty: this is the first part to leave the window)"
    body = f"Current anchor:\n{current}\n\nLeaving the window now:\n{flatten(evicted)}"
    return [{"role": "system", "content": prompt.instructions(ANCHOR_INSTRUCTIONS)}, {"role": "user", "content": body}]


def clean_summary(text: str) -> str:
    """ContextChef's formatCompactSummary: drop every <analysis> scratchpad, keep the
    <summary> body if tagged (tags in any letter case), collapse runs of three or more
    newlines to one blank line."""
    text = re.sub(r"<analysis>.*?</analysis>", "", text, flags=re.DOTALL | re.IGNORECASE)
    match = re.search(r"<summary>(.*?)(?:</summary>|$)", text, flags=re.DOTALL | re.IGNORECASE)
    if match:
        text = match.group(1)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def summary_message(prefix: str, body: str, archive_uri: str) -> Message:
    content = f"{prefix}\n\n{body}\n\n(The full text of the summarized part is archived at {archive_uri}.)"
    return {"role": "user", "content": content}


def span_chars(messages: list[Message]) -> int:
    return sum(len(orjson.dumps(m.get("content"))) for m in messages)
