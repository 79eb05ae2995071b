"""Journal records as stored: compact, compressed when that pays, and every older form readable.

A turn's record (`TurnDraft.record`) is a JSON object; most of its fields are usually at
their default (null, false, a completed status) and its message hashes are kept in the
turn's link already. The stored form leaves those out, rounds the timestamps to the
millisecond and deflates the JSON with a preset dictionary of the words records are made
of (their keys, the roles, the usage fields, then common English words, nearest the data),
which more than halves a short chat turn.
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
    b'"finished":17"created":17"path_tokens":"client_tokens":"context_tokens":"window":"win_0",'
    b'"request_id":"req_"encoding":"cl100k_base","o200k_base","tokens":["model":"gpt-4o-mini",'
    b'"usage":{"prompt_tokens":"completion_tokens":"total_tokens":"prompt_tokens_details":'
    b'{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,'
    b'"accepted_prediction_tokens":0,"rejected_prediction_tokens":0},"path_savings":{"client_tokens":'
    b'"sent_tokens":"cost_usd":0.0,"saved_cost_usd":0.0},"status":"failed","interrupted","canceled",'
    b'"error":{"message":"type":"tool_calls":[{"id":"call_","type":"function","function":{"name":'
    b'"arguments":"{\\"},"door":"responses","messages","door_id":"resp_"stream":true,'
    b'"output":{"role":"assistant","content":null,"refusal":null,"annotations":[]},'
    b'"input":[{"role":"tool","tool_call_id":"call_","content":"{"role":"user","content":"'
    b"the of and to in is that for it as with was on be by this are or from at an which have not but they "
    b"you can all were we one there their has been more if will would when so what about also other into its "
    b"only time some these could than them then may like use such first two any how our over new most after "
    b"where just should because each well here very through between make those does want know need get see "
    b"work way please thank help let me sure yes no here's example following code file function data value "
)
_PACKER = zlib.compressobj(6, zlib.DEFLATED, -12, 8, zlib.Z_DEFAULT_STRATEGY, _DICTIONARY)
"""Copied for each record, the dictionary already loaded: a 4 KB window (a record's repeats
are near each other, and a small window is cheap to copy)."""


def encode(record: JSONObject) -> bytes:
    """The stored form of a turn's record (its hashes live in the turn's link)."""
    compact = {k: v for k, v in record.items() if k != "hashes" and not (k in _DEFAULTS and v == _DEFAULTS[k])}
    for stamp in ("created", "finished"):
        if isinstance(compact.get(stamp), float):
            compact[stamp] = round(compact[stamp], 3)
    text = orjson.dumps(compact)
    packer = _PACKER.copy()
    packed = _DEFLATED + packer.compress(text) + packer.flush()
    return packed if len(packed) < len(text) else text


def decode(raw: bytes) -> JSONObject:
    """A stored record, in any of its forms, as it was written."""
    if raw[:1] == _DEFLATED:
        unpacker = zlib.decompressobj(-15, _DICTIONARY)
        raw = unpacker.decompress(memoryview(raw)[1:]) + unpacker.flush()
    record: JSONObject = orjson.loads(raw)
    for key, default in _DEFAULTS.items():
        record.setdefault(key, default)
    return record
