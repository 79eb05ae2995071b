"""The floor of a Python gateway with memory: what every managed request must do at least.

Read the body, parse and re-serialize it with orjson, run one EVALSHA before forwarding
and one after (redis.asyncio, over the unix socket of the proxy's own embedded server),
relay the upstream's answer. No validation, no tokens, no composition: the proxy's CPU
per request over this one's is the proxy's own work (issue 15's floor relay, kept here so
that the benchmark runs it in the same run as the other targets).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

import aiohttp
import orjson
import redis.asyncio as redis
from aiohttp import web

from bench.upstream import _run

LOAD = "return redis.call('LRANGE', KEYS[1], -4, -1)"
APPEND = "redis.call('RPUSH', KEYS[1], ARGV[1]) redis.call('LTRIM', KEYS[1], -100, -1) return 1"


def build(upstream: str, sock: str) -> web.Application:
    async def clients(app: web.Application) -> AsyncIterator[None]:
        app["client"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False)
        app["redis"] = redis.Redis(unix_socket_path=sock)
        app["load"] = await app["redis"].script_load(LOAD)
        app["append"] = await app["redis"].script_load(APPEND)
        yield
        await app["client"].close()
        await app["redis"].aclose()

    async def chat(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        key = "floor:" + request.headers.get("X-Session-Id", "none")
        store = request.app["redis"]
        await store.evalsha(request.app["load"], 1, key)
        async with request.app["client"].post(
            upstream + "/v1/chat/completions",
            data=orjson.dumps(body),
            headers={"Content-Type": "application/json", "Authorization": request.headers.get("Authorization", "")},
        ) as answer:
            data = await answer.read()
        message = orjson.loads(data)["choices"][0]["message"]
        await store.evalsha(request.app["append"], 1, key, orjson.dumps(message))
        return web.Response(body=data, content_type="application/json")

    app = web.Application(client_max_size=2**28)
    app.cleanup_ctx.append(clients)
    app.router.add_post("/v1/chat/completions", chat)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--sock", required=True, help="the Redis unix socket")
    args = parser.parse_args()
    _run(build(args.upstream.rstrip("/"), args.sock), args.port)


if __name__ == "__main__":
    main()
