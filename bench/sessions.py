"""Pre-populated sessions for the benchmark, written straight to the proxy's Redis.

Each session gets the same synthetic history, journaled as the proxy itself would
journal it (hashes, token counts, chain index), so the proxy sees real sessions.
"""

from __future__ import annotations

import redis.asyncio as aioredis
import tiktoken

from proxy.context.tokens import FALLBACK_ENCODING, count_message
from proxy.sessions import TurnDraft, message_hash, tenant_of
from proxy.store import SessionKeys, Store
from proxy.types import JSONObject, Message

API_KEY = "sk-bench"
TENANT = tenant_of(f"Bearer {API_KEY}", "")
SYSTEM: Message = {"role": "system", "content": "You are a helpful assistant. Answer briefly and precisely."}


def user_message(n: int) -> Message:
    return {
        "role": "user",
        "content": f"Question {n}: what is the status of item {n} in the inventory, and when was it last moved?",
    }


def assistant_message(n: int) -> Message:
    return {
        "role": "assistant",
        "content": f"Item {n} is in stock; it was last moved on day {n % 28 + 1} to shelf {n % 17}.",
    }


def history(depth: int) -> list[Message]:
    messages = [SYSTEM]
    for n in range(depth):
        messages += [user_message(n), assistant_message(n)]
    return messages


def _records(depth: int) -> list[tuple[JSONObject, list[str]]]:
    encoder = tiktoken.get_encoding(FALLBACK_ENCODING)
    records = []
    path = 0  # the conversation's tokens through the turn before, as the recorder keeps them
    for n in range(depth):
        inputs = [user_message(n)]
        input_tokens = [count_message(encoder, m) for m in inputs]
        output = assistant_message(n)
        system = [SYSTEM] if n == 0 else None  # the first turn carries the session's system prompt
        draft = TurnDraft(
            model="bench-model",
            input=inputs,
            input_tokens=input_tokens,
            input_hashes=[message_hash(m) for m in inputs],
            encoding=FALLBACK_ENCODING,
            request_id=f"req_bench_{n}",
            window="win_0",
            stream=False,
            context_tokens=0,
            system=system,
            system_tokens=[count_message(encoder, m) for m in system or ()],
            path_tokens=path + sum(input_tokens),
        )
        record = draft.record(
            status="completed", output=output, output_tokens=count_message(encoder, output),
            output_hash=message_hash(output), usage=None, error=None,
        )  # fmt: skip
        records.append((record, record["hashes"]))
        path = record["path_tokens"]
    return records


async def populate(store: Store, redis_url: str, sessions: list[str], depth: int) -> None:
    """Journal `depth` turns into the first session through the store, then copy its keys."""
    template = SessionKeys(TENANT, sessions[0])
    for record, hashes in _records(depth):
        await store.append_turn(template, record, parent=None, completed=True, hashes=hashes, ttl_s=3600, usage=None)
    client = aioredis.Redis.from_url(redis_url)
    try:
        for start in range(1, len(sessions), 200):
            async with client.pipeline(transaction=False) as pipe:
                for name in sessions[start : start + 200]:
                    target = SessionKeys(TENANT, name)
                    for source_key, target_key in zip(template.all(), target.all(), strict=True):
                        pipe.copy(source_key, target_key, replace=True)
                await pipe.execute()
    finally:
        await client.aclose()
