"""`python -m bench.memory`: what a journaled turn costs in Redis, against its text.

Real turns through a running proxy (its embedded server, the benchmark's lean upstream):
300 short chat turns of about 390 characters of text (a question and the answer), and 50
long tool-result turns (a tool call, a 6,000-character result, a short question, the
answer; every answer its own, as in a real session). For each session: the text its messages hold (every content string and tool-call
argument), the memory its keys take (`MEMORY USAGE ... SAMPLES 0`, summed over the
session's keys) and what the append-only file grew by while it was written.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

import aiohttp
import redis.asyncio as aioredis

from bench.common import HEADERS, chat_body
from bench.procs import running
from bench.sessions import TENANT
from bench.upstream import NUMBERED
from proxy.store import SessionKeys
from proxy.types import Message

QUESTION = (
    "Question {n}: here is the next part of the inventory report; please check every line against the "
    "order book, tell me which items are missing or were moved since the last count, and keep the answer "
    "short enough to paste back into the weekly summary that goes to the warehouse team on Friday {n}."
)
SHORT_TURNS = 300
TOOL_RESULT = "".join(
    f"row {i:04d}: item {i * 7 % 1000:03d} on shelf {i % 17:02d}, count {i * 13 % 97}\n" for i in range(130)
)


def short_turn(n: int) -> list[Message]:
    return [{"role": "user", "content": QUESTION.format(n=n)}]


def tool_turn(n: int) -> list[Message]:
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "read_rows", "arguments": f'{{"page": {n}}}'}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": TOOL_RESULT},
        {"role": "user", "content": f"Summarize page {n} in one line."},
    ]


def text_of(messages: list[Message]) -> int:
    total = 0
    for message in messages:
        content = message.get("content")
        total += len(content) if isinstance(content, str) else 0
        for call in message.get("tool_calls") or ():
            total += len(call["function"]["arguments"])
    return total


async def journal(
    proxy: str, redis: aioredis.Redis, session: str, turns: int, build: Callable[[int], list[Message]]
) -> dict[str, float]:
    aof_before = (await redis.info("persistence"))["aof_current_size"]
    text = 0
    async with aiohttp.ClientSession() as http:
        for n in range(turns):
            messages = build(n)
            body = chat_body(messages, user=NUMBERED)
            async with http.post(
                f"{proxy}/v1/chat/completions", data=body, headers={**HEADERS, "X-Session-Id": session}
            ) as r:
                assert r.status == 200, await r.text()
                answer = (await r.json())["choices"][0]["message"]
            text += text_of([*messages, answer])
    await asyncio.sleep(1.2)  # the append-only file is written once a second
    aof = (await redis.info("persistence"))["aof_current_size"] - aof_before
    used = 0
    for key in SessionKeys(TENANT, session).all():
        used += await redis.memory_usage(key, samples=0) or 0
    return {"turns": turns, "text": text, "memory": used, "aof": aof}


def report(name: str, figures: dict[str, float]) -> str:
    text = figures["text"]
    return (
        f"| {name} | {figures['turns']:.0f} | {text / 1024:.0f} KB | {figures['memory'] / 1024:.0f} KB "
        f"| {figures['memory'] / text:.3f}x | {figures['aof'] / text:.2f}x |"
    )


async def short_turns_memory(proxy: str, redis_url: str) -> dict[str, float]:
    """The short chat turns' figures alone, on a running proxy (`python -m bench` reports them)."""
    redis = aioredis.Redis.from_url(redis_url)
    try:
        return await journal(proxy, redis, "memory-short", SHORT_TURNS, short_turn)
    finally:
        await redis.aclose()


async def main_async() -> None:
    async with running("cpmemory") as (procs, url):
        redis = aioredis.Redis.from_url(url)
        proxy = f"http://127.0.0.1:{procs.proxy_port}"
        short = await journal(proxy, redis, "memory-short", SHORT_TURNS, short_turn)
        tools = await journal(proxy, redis, "memory-tools", 50, tool_turn)
        await redis.aclose()
    print("| session | turns | text | Redis memory | memory / text | AOF growth / text |")
    print("|---|---|---|---|---|---|")
    print(report("short chat turns", short))
    print(report("long tool-result turns", tools))


def main() -> None:
    argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__).parse_args()
    asyncio.run(main_async())


if __name__ == "__main__":
    main()
