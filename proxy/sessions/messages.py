"""Content identity of chat messages: the canonical form and its hash.

Two messages are "the same" when the model would see the same thing: the role,
the content (null and "" alike; a list of text parts equal to the joined text), the
name, the tool calls and the tool call id. Tool calls are compared by meaning: the
same ids and names, and arguments that parse to the same JSON value, whatever their
whitespace or key order (frameworks re-serialize them). Fields a response carries but
a request does not (refusal: null, annotations) and the proxy's own `pinned` marker do
not count. The hash chain over messages (see `chain_hashes`) is
what lets the proxy find the part of a full-history request the journal already has.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.types import Message

LEADING_ROLES = ("system", "developer")


def _content(content: Any) -> Any:
    if content in (None, ""):
        return None
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return content


def canonical(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.get("role")}
    content = _content(message.get("content"))
    if content is not None:
        out["content"] = content
    for key in ("name", "tool_call_id", "refusal"):
        if message.get(key):
            out[key] = message[key]
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [
            {
                "id": call.get("id"),
                "name": (call.get("function") or {}).get("name"),
                "arguments": _arguments((call.get("function") or {}).get("arguments")),
            }
            for call in calls
        ]
    return out


def _arguments(arguments: Any) -> Any:
    """A tool call's arguments by meaning: the parsed JSON value, else the text as it is."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return {"json": orjson.loads(arguments)}
    except orjson.JSONDecodeError:
        return arguments


def message_hash(message: Message) -> str:
    return hashlib.sha256(orjson.dumps(canonical(message), option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def chain_step(previous: str, message_digest: str) -> str:
    """One link of the chain; `append_turn.lua` computes the same with redis.sha1hex."""
    return hashlib.sha1((previous + message_digest).encode()).hexdigest()


def chain_hashes(digests: list[str]) -> list[str]:
    """The chain hash after each message: entry i covers messages 0..i."""
    out = []
    previous = ""
    for digest in digests:
        previous = chain_step(previous, digest)
        out.append(previous)
    return out


_COMMA, _CLOSE = b","[0], b"]"[0]


@dataclass(frozen=True)
class Digests:
    """A request's content hashes and chain hashes, with a cheap fingerprint of the whole."""

    end: int
    """The length of the messages' serialized form without its closing bracket."""
    fingerprint: int
    """`hash()` of that serialized form up to `end`."""
    hashes: list[str]
    chain: list[str]


def digest(messages: list[Message], previous: Digests | None = None) -> Digests:
    """Hash `messages`, reusing `previous` when they start with exactly its messages.

    A full-history client re-sends what it sent last time plus a little: when the
    serialized form of this request starts with that of the last one, byte for byte and
    ending on a message boundary, the resent messages are not hashed again (one
    serializer call and one `hash()` instead of a canonical hash per message).
    """
    serialized = orjson.dumps(messages)
    end = len(serialized) - 1
    fingerprint = hash(serialized[:end])
    if previous is None or not previous.hashes or not _starts_with(serialized, previous):
        hashes = [message_hash(m) for m in messages]
        return Digests(end, fingerprint, hashes, chain_hashes(hashes))
    reuse = len(previous.hashes)
    fresh = [message_hash(m) for m in messages[reuse:]]
    chain = previous.chain[:]
    last = chain[-1]
    for h in fresh:
        last = chain_step(last, h)
        chain.append(last)
    return Digests(end, fingerprint, previous.hashes + fresh, chain)


def _starts_with(serialized: bytes, previous: Digests) -> bool:
    at = previous.end
    return len(serialized) > at and serialized[at] in (_COMMA, _CLOSE) and hash(serialized[:at]) == previous.fingerprint


def leading_count(messages: list[Message]) -> int:
    """How many messages at the start are system/developer instructions."""
    for index, message in enumerate(messages):
        if message.get("role") not in LEADING_ROLES:
            return index
    return len(messages)


def wire(message: Message) -> Message:
    """The message as an upstream accepts it: without the proxy's `pinned` marker."""
    if "pinned" not in message:
        return message
    return {k: v for k, v in message.items() if k != "pinned"}
