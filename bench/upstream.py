"""A lean fake OpenAI upstream for benchmarks: constant answers, as little work as possible.

The tests' fake validates and tokenizes every request; that would inflate the
baseline the proxy is compared against, so benchmarks use this twin.
"""

from __future__ import annotations

import argparse
import itertools
import time

import orjson
from aiohttp import web

ANSWER = "This is a benchmark answer of a typical short length, twenty words or so, from the lean fake upstream."
NUMBERED = "bench-numbered"
"""A request whose `user` is this gets an answer of its own: the answer, then its number."""
_answered = itertools.count()


async def chat(request: web.Request) -> web.StreamResponse:
    raw = await request.read()
    body = orjson.loads(raw)
    usage = {"prompt_tokens": len(raw) // 4, "completion_tokens": 24, "total_tokens": len(raw) // 4 + 24}
    base = {
        "id": "chatcmpl-bench",
        "created": int(time.time()),
        "model": body["model"],
        "system_fingerprint": "fp_bench",
    }
    if not body.get("stream"):
        answer = f"{ANSWER} ({next(_answered)})" if body.get("user") == NUMBERED else ANSWER
        message = {"role": "assistant", "content": answer, "refusal": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        payload = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
        return web.Response(body=orjson.dumps(payload), content_type="application/json")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    words = ANSWER.split(" ")
    for index in range(20):
        delta = {"content": words[index % len(words)] + " "} if index else {"role": "assistant", "content": ""}
        chunk = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    final = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    await response.write(b"data: " + orjson.dumps(final) + b"\n\n")
    if include_usage:
        await response.write(
            b"data: "
            + orjson.dumps({**base, "object": "chat.completion.chunk", "choices": [], "usage": usage})
            + b"\n\n"
        )
    await response.write(b"data: [DONE]\n\n")
    return response


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    _run(app, args.port)


def _run(app: web.Application, port: int) -> None:
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        import asyncio

        loop = asyncio.new_event_loop()
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, loop=loop)


if __name__ == "__main__":
    main()
