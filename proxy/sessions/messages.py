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


@dataclass(frozen=True)
class Digests:
    """A request's content hashes and chain hashes, with a cheap fingerprint per message."""

    fingerprints: list[int]
    hashes: list[str]
    chain: list[str]


def digest(messages: list[Message], previous: Digests | None = None) -> Digests:
    """Hash `messages`, reusing `previous` for the prefix they share with it.

    A full-history client re-sends what it sent last time plus a little: the messages it
    sent byte for byte the same (by a fingerprint of their serialized form, far cheaper
    than the canonical hash) are not hashed again.
    """
    fingerprints = [hash(orjson.dumps(m)) for m in messages]
    reuse = 0
    if previous is not None:
        limit = min(len(messages), len(previous.fingerprints))
        old = previous.fingerprints
        while reuse < limit and fingerprints[reuse] == old[reuse]:
            reuse += 1
    if reuse == 0:
        hashes = [message_hash(m) for m in messages]
        return Digests(fingerprints, hashes, chain_hashes(hashes))
    assert previous is not None
    fresh = [message_hash(m) for m in messages[reuse:]]
    chain = previous.chain[:reuse]
    last = chain[-1]
    for h in fresh:
        last = chain_step(last, h)
        chain.append(last)
    return Digests(fingerprints, previous.hashes[:reuse] + fresh, chain)


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
