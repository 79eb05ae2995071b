"""A full-history client's resent conversation, recognised in its body's bytes before parsing.

A Chat Completions client that keeps no state sends its whole conversation on every turn: the
messages of its last request, byte for byte, then what is new. Parsing and checking them again
costs work in proportion to the conversation. `ResentBodies` remembers, for the bodies parsed
lately, the places in their bytes where a message ends and the next begins, each with the
messages before it (already checked) and the body's members before `messages`. A body whose
bytes start like a remembered body's, up to one of those places, is parsed from there on only.

A place is remembered only when the body's layout is pinned down byte for byte: the body is
exactly its compact JSON (as orjson and the openai SDK write it: no member twice, no spaces), so
the place is the top-level `messages` array's and nothing else. A body found by a place is used
only if its rest is compact JSON too (`Resent.compact`). Bodies written otherwise (spaces,
another key order in a message, an escaped key) are parsed whole, as always.
A place is found by the position of a message's start, `,{"role":"`, and looked up by the
tenant, that position and the 64 bytes before it; the whole prefix is compared before it is
used. A tenant's bodies serve only that tenant (no caller learns, even by timing, what another
sent).
Once a place is used, its body's places are forgotten (the next body's take over), so a
conversation holds the places of its latest body only. Bounded by memory (a body's bytes and
its parsed messages, about), oldest first out.
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import takewhile

import orjson

from proxy.types import JSONObject, Message, frozen

_MESSAGE_START = b',{"role":"'
_PLACES_TRIED = 8
"""Message starts looked up, from the end: the last request's end is before the new turn's
assistant message (an agent's turn adds it and its tool results), or (asked again, edited)
before the last message."""
_KEY_BYTES = 64
BYTES_PER_MESSAGE = 1024
"""How many bytes a `server.cache_messages` message stands for (0 messages: off)."""
_PARSED_MESSAGE_BYTES = 768
"""What a parsed message takes besides its bytes, about (a dict, its strings, two list slots:
measured with tracemalloc on short chat messages)."""


_Key = tuple[str, int, int]
"""The tenant, the place's position and the hash of the 64 bytes before it."""


@frozen
class Resent:
    """A body's first messages as an earlier body had them, and the JSON object of the rest."""

    messages: list[Message]
    before: JSONObject
    """The body's members before `messages` (in the prefix too)."""
    rest: bytes
    """`{"messages":[` and the body's bytes after the prefix: its other messages and members."""

    def compact(self, rest: JSONObject) -> bool:
        """Whether `rest`, parsed from `self.rest`, is written compactly, as a remembered body is:
        then no member comes twice (a second `messages`, however escaped, would stand for the
        whole array) and the body joined of prefix and rest is pinned down byte for byte."""
        return orjson.dumps(rest) == self.rest


@frozen
class _Place:
    raw: bytes
    at: int
    """`raw[at]` is the `,` or `]` after the prefix's last message."""
    messages: list[Message]
    before: JSONObject
    pair: tuple[_Key, ...]
    """The keys of both places remembered for `raw`: once one is used, the next body's take over."""
    cost: int
    """Half the memory the body holds, about: its bytes and its parsed messages."""


class ResentBodies:
    def __init__(self, max_bytes: int) -> None:
        """`max_bytes`: of the bodies and their parsed messages, about."""
        self._places: OrderedDict[_Key, _Place] = OrderedDict()
        self._bytes = 0
        self._max = max_bytes
        self.hits = 0

    def find(self, raw: bytes, tenant: str) -> Resent | None:
        """The prefix `raw` starts with that a body of the same tenant had, if any."""
        if not self._places:
            return None
        at = len(raw)
        for _ in range(_PLACES_TRIED):
            at = raw.rfind(_MESSAGE_START, 0, at)
            if at < _KEY_BYTES:
                return None
            place = self._places.get(_key(tenant, raw, at))
            if place is not None and place.at == at and raw.startswith(memoryview(place.raw)[:at]):
                self._forget(place)
                self.hits += 1
                return Resent(place.messages, place.before, b'{"messages":[' + raw[at + 1 :])
        return None

    def remember(self, raw: bytes, tenant: str, body: JSONObject, messages: list[Message], *, resent: bool) -> None:
        """Remember where `raw`'s last two messages begin and end, if its layout is pinned down.

        `resent`: `body` is a found prefix's and a compact rest (`Resent.compact`), so its bytes
        up to its last message are pinned down already; else they are checked whole."""
        cost = (len(raw) + _PARSED_MESSAGE_BYTES * len(messages)) // 2
        if len(messages) < 2 or 2 * cost > self._max:
            return
        before = dict(takewhile(lambda member: member[0] != "messages", body.items()))
        head = orjson.dumps(before)[:-1] + b',"messages":[' if before else b'{"messages":['
        after = {key: value for key, value in body.items() if key not in before and key != "messages"}
        tail = b"]," + orjson.dumps(after)[1:] if after else b"]}"
        last = b"," + orjson.dumps(messages[-1])
        end = len(raw) - len(tail)
        at = end - len(last)
        if not (raw.startswith(head) and raw.endswith(tail) and raw.startswith(last, at)):
            return
        if not resent and orjson.dumps(body) != raw:  # spaces, a member twice, another message layout
            return
        if at < _KEY_BYTES or not raw.startswith(_MESSAGE_START, at):
            return
        pair = (_key(tenant, raw, at), _key(tenant, raw, end))
        self._put(pair[0], _Place(raw, at, messages[:-1], before, pair, cost))
        self._put(pair[1], _Place(raw, end, messages, before, pair, cost))

    def _put(self, key: _Key, place: _Place) -> None:
        held = self._places.get(key)
        if held is not None:
            self._forget(held)
        self._places[key] = place
        self._bytes += place.cost
        while self._bytes > self._max:
            self._forget(next(iter(self._places.values())))

    def _forget(self, place: _Place) -> None:
        """Both places of `place`'s body: one was used (a conversation moved on) or is given up."""
        for key in place.pair:
            held = self._places.get(key)
            if held is not None and held.raw is place.raw:
                self._pop(key)

    def _pop(self, key: _Key) -> None:
        old = self._places.pop(key, None)
        if old is not None:
            self._bytes -= old.cost


def _key(tenant: str, raw: bytes, at: int) -> _Key:
    return tenant, at, hash(raw[at - _KEY_BYTES : at])
