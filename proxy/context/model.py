"""The core's conversation model: Chat Completions, with a few marks for other wire APIs.

Every door (`proxy/doors/`) turns its API's request into a `ChatRequest`, and every dialect
(`proxy/dialects/`) turns a `ChatRequest` into its upstream's API; in between, the journal,
composition, token counting and the strategies see only this model:

- the request is a Chat Completions body (`model`, `messages`, `tools`, `tool_choice`,
  `max_completion_tokens` / `max_tokens`, `stream`, ...); fields the core does not read travel
  in the body untouched, for the upstream to judge;
- messages are Chat Completions messages (`system`, `developer`, `user`, `assistant` with
  `tool_calls`, `tool` with `tool_call_id`), content a string or a list of parts;
- the answer is a `chat.completion` or a stream of `chat.completion.chunk`s ending with a
  usage-only chunk; usage is OpenAI's (`prompt_tokens`, `completion_tokens`, ...).

What another API needs and Chat Completions has no place for travels in these marks, and
nowhere else (`strip_marks` removes them for an OpenAI-compatible upstream):

- a content part, a tool call (`tool_calls[i].cache_control`) and a tool (`tools[i].cache_control`)
  may carry Anthropic's `cache_control`;
- an assistant message may carry `thinking_blocks` (Anthropic's `thinking` / `redacted_thinking`
  blocks, verbatim, signatures included) and `reasoning_content` (the reasoning as text);
- a `tool` message may carry `is_error`;
- a content part of type `document` is an Anthropic document block;
- the body may carry `anthropic`: Messages parameters with no Chat Completions equivalent
  (`top_k`, `thinking`, `metadata`, `context_management`, ...);
- usage may carry `cache_creation_input_tokens` and `cache_read_input_tokens`;
- a stream's delta may carry `reasoning_content` and `thinking_blocks` (complete blocks);
  a choice may carry `stop_sequence`.

An assistant message is kept in one normal form whatever door it came through or went out
of, so that a message a client sends back is the one the journal recorded: `content` a
string when its text is one block (a list of text parts when several, null when none),
`tool_calls` with JSON-string arguments, thinking in `thinking_blocks`.
"""

from __future__ import annotations

import re

from proxy.types import JSONObject, Message, frozen

MESSAGE_MARKS = ("thinking_blocks", "reasoning_content", "is_error")
"""Message fields of the core that no OpenAI-compatible upstream accepts."""
_FOREIGN_PARTS = frozenset({"thinking", "redacted_thinking", "document"})


@frozen
class ChatRequest:
    """The core's request: a Chat Completions body, parsed and validated by its door."""

    body: JSONObject
    raw: bytes
    """The body as the client sent it (Chat Completions clients): what `X-Context-Strategy: off` forwards."""
    model: str
    messages: list[Message]
    stream: bool
    include_usage: bool
    own_system: bool = False
    """The request's leading block is its whole system prompt, even when it has none (a Responses
    API request's `instructions`): the session's block is not carried over to it."""
    marked: bool = False
    """The messages and tools may carry Anthropic's marks (`cache_control` on parts, tool calls and
    tools): the request came through a door that makes them, so an OpenAI-compatible upstream must
    not see them."""

    @property
    def max_output_tokens(self) -> int:
        value = self.body.get("max_completion_tokens") or self.body.get("max_tokens")
        return int(value) if isinstance(value, int) else 0


_MARKS = re.compile(
    rb'"(?:thinking_blocks|is_error|reasoning_content|cache_control)"|"type":\s*"(?:document|thinking|redacted_thinking)"'
)


def has_marks(messages_json: bytes) -> bool:
    """Whether serialized messages may hold a mark, in one scan: the request's own, or a
    journaled turn's that another door made (`strip_marks` then decides)."""
    return _MARKS.search(messages_json) is not None


def strip_marks(messages: list[Message]) -> list[Message]:
    """The messages as an OpenAI-compatible upstream takes them: message marks, `cache_control`
    (on parts and tool calls) and Anthropic-only parts dropped (a message left with no part
    gets an empty text)."""
    out = []
    for message in messages:
        if not isinstance(message, dict):
            out.append(message)
            continue
        if any(mark in message for mark in MESSAGE_MARKS):
            message = {k: v for k, v in message.items() if k not in MESSAGE_MARKS}
        content = message.get("content")
        if isinstance(content, list):
            kept = [uncached(p) for p in content if not (isinstance(p, dict) and p.get("type") in _FOREIGN_PARTS)]
            message = {**message, "content": kept or ""}
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message = {**message, "tool_calls": [uncached(call) for call in calls]}
        out.append(message)
    return out


def uncached(item: object) -> object:
    """A part, tool call or tool without its `cache_control` (anything else as it is)."""
    if isinstance(item, dict) and "cache_control" in item:
        return {k: v for k, v in item.items() if k != "cache_control"}
    return item
