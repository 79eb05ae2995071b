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
from typing import Any

import orjson

from proxy.types import Message, frozen

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


@frozen
class Digests:
    """A request's content hashes and chain hashes, with what recognises its messages resent."""

    hashes: list[str]
    chain: list[str]
    messages: list[Message]
    """The request's messages, the objects themselves: the chat door hands a resent conversation
    on as the same objects (`proxy/doors/resent.py`)."""
    prefixes: tuple[tuple[int, int, int], ...] | None
    """(message count, byte length, `hash()`) of the serialized form without its closing
    bracket, for all the messages and for all but the last; None when the messages were
    recognised by identity (computed from `messages` if a next request needs them)."""


def digest(messages: list[Message], previous: Digests | None = None) -> Digests:
    """Hash `messages`, reusing `previous` for the messages they resend.

    A full-history client re-sends what it sent last time plus a little (or all of it but
    its last message, edited or asked again). Its first messages may be the very objects of
    the last request (resent byte for byte, so not parsed again), or they are recognised by
    their serialized form: when it starts with that of the last request's messages, byte for
    byte and ending on a message boundary, those messages are not hashed again (one
    serializer call and a `hash()` instead of a canonical hash per message). Anything else
    is hashed afresh.
    """
    reuse = _same_objects(messages, previous)
    prefixes = None
    if reuse == 0:
        serialized = orjson.dumps(messages)
        reuse = _resent(serialized, previous)
        prefixes = _prefixes(messages, serialized)
    if reuse == 0:
        hashes = [message_hash(m) for m in messages]
        chain = chain_hashes(hashes)
    else:
        assert previous is not None
        hashes = previous.hashes[:reuse]
        chain = previous.chain[:reuse]
        last = chain[-1]
        for message in messages[reuse:]:
            hashes.append(message_hash(message))
            last = chain_step(last, hashes[-1])
            chain.append(last)
    return Digests(hashes, chain, messages, prefixes)


def _same_objects(messages: list[Message], previous: Digests | None) -> int:
    """How many of the previous request's messages this one starts with, as the same objects."""
    count = 0
    for mine, theirs in zip(messages, previous.messages if previous else ()):
        if mine is not theirs:
            break
        count += 1
    return count


def _prefixes(messages: list[Message], serialized: bytes) -> tuple[tuple[int, int, int], ...]:
    end = len(serialized) - 1
    out = [(len(messages), end, hash(serialized[:end]))]
    if len(messages) > 1:
        end -= len(orjson.dumps(messages[-1])) + 1
        out.append((len(messages) - 1, end, hash(serialized[:end])))
    return tuple(out)


def _resent(serialized: bytes, previous: Digests | None) -> int:
    """How many of the previous request's messages this one starts with (as `_prefixes` saw them)."""
    if previous is None:
        return 0
    prefixes = previous.prefixes
    if prefixes is None:
        prefixes = _prefixes(previous.messages, orjson.dumps(previous.messages))
    for count, end, fingerprint in prefixes:
        if (
            count
            and len(serialized) > end
            and serialized[end] in (_COMMA, _CLOSE)
            and hash(serialized[:end]) == fingerprint
        ):
            return count
    return 0


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
