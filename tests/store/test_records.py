"""Journal records as stored: compact and compressed, and the JSON of earlier versions still read."""

from __future__ import annotations

import base64
import os
import random
import zlib

import orjson
import redis.asyncio as aioredis

from proxy.sessions import TurnDraft
from proxy.sessions.messages import chain_hashes
from proxy.store import SessionKeys, Store, records

TENANT = "r" * 32


def a_record(text: str) -> dict:
    draft = TurnDraft(
        model="gpt-4o-mini", input=[{"role": "user", "content": text}], input_tokens=[12], input_hashes=["a" * 32],
        encoding="o200k_base", request_id="req_0123456789abcdef01234567", window="win_0", stream=False,
        context_tokens=40, path_tokens=12,
    )  # fmt: skip
    return draft.record(
        status="completed", output={"role": "assistant", "content": "Noted, " + text}, output_tokens=9,
        output_hash="b" * 32, usage={"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}, error=None,
    )  # fmt: skip


def test_a_short_turn_is_stored_in_less_than_its_json_and_read_back_as_written() -> None:
    record = a_record("What is on shelf four of the north aisle, and when was it counted last?")
    stored = records.encode(record)
    assert len(stored) < 0.5 * len(orjson.dumps(record))
    back = records.decode(stored)
    assert {**back, "hashes": record["hashes"]} == {
        **record,
        "created": round(record["created"], 3),
        "finished": round(record["finished"], 3),
    }


def test_a_record_that_does_not_compress_is_kept_as_compact_json() -> None:
    record = {"z": base64.b85encode(os.urandom(30)).decode()}
    stored = records.encode(record)
    assert stored.startswith(b"{") and orjson.loads(stored) == record
    back = records.decode(stored)
    assert back == {**records._DEFAULTS, **record}


async def test_a_turn_journaled_as_json_by_an_earlier_version_still_loads(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    client = aioredis.Redis.from_url(flushed_redis)
    keys = SessionKeys(TENANT, "old")
    old, new = a_record("an old turn"), a_record("a new turn")
    await store.append_turn(keys, new, parent=None, completed=True, hashes=new["hashes"], ttl_s=600, usage=None)
    await client.hset(keys.turns, "0", orjson.dumps(old))  # as versions before the compact form wrote it
    assert (await client.hget(keys.turns, "0")).startswith(b"{")
    dump = await store.read_session(keys)
    assert dump is not None and dump.turns[0].record == old
    loaded = await store.load_context(keys, 0, [])
    assert loaded.turns[0][1]["input"] == old["input"] and loaded.turns[0][1]["model"] == "gpt-4o-mini"
    await client.aclose()
    await store.close()


async def test_a_session_whose_links_are_of_the_hex_form_continues_and_is_found(flushed_redis: str) -> None:
    store = await Store.connect(flushed_redis)
    client = aioredis.Redis.from_url(flushed_redis)
    keys = SessionKeys(TENANT, "hex-links")
    first, second = [f"{n:032x}" for n in (1, 2)], [f"{n:032x}" for n in (3, 4)]
    record = a_record("first")
    await store.append_turn(keys, record, parent=None, completed=True, hashes=first, ttl_s=600, usage=None)
    chain = chain_hashes(first)[-1]
    await client.hset(keys.links, "0", f"-1 0 {chain} {','.join(first)}")  # as versions before the binary form
    seq, parent, depth = await store.append_turn(
        keys, record, parent=None, completed=True, hashes=second, ttl_s=600, usage=None
    )
    assert (seq, parent, depth) == (1, 0, 1)
    found = await store.load_context(keys, 0, chain_hashes([*first, *second]))
    assert found.found and found.parent == 1 and found.matched == 4, "the child's chain continues the hex one"
    trimmed = await store.load_overlap(keys, [*first[1:], *second])
    assert trimmed.trimmed and trimmed.parent == 1, "hashes of both link forms are checked"
    dump = await store.read_session(keys)
    assert dump is not None and [(t.seq, t.parent, t.depth) for t in dump.turns] == [(0, -1, 0), (1, 0, 1)]
    await client.aclose()
    await store.close()


def test_each_text_is_deflated_through_the_smallest_window_that_holds_it_with_the_same_bytes_out() -> None:
    chance = random.Random(25)
    dictionary = b'{"role":"tool","tool_call_id":"call_","content":"the result of the call"}' + chance.randbytes(900)
    packing = records.Deflate(dictionary, level=1, window_bits=15, mem_level=4)
    whole = zlib.compressobj(1, zlib.DEFLATED, -15, 4, zlib.Z_DEFAULT_STRATEGY, dictionary)
    for size in (40, 2_000, 2_500, 3_000, 3_900, 7_000, 15_000, 31_000, 60_000):
        text = base64.b85encode(chance.randbytes(size))[:size] + dictionary[:80]  # ends as the dictionary starts
        reference = whole.copy()
        assert packing.pack(text) == b"\x01" + reference.compress(text) + reference.flush()
        assert packing.unpack(packing.pack(text)) == text
