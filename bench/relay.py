"""The floor for any Python proxy on this stack: a bare aiohttp relay of a few lines."""

from __future__ import annotations

import argparse

import aiohttp
from aiohttp import web

from bench.upstream import _run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()

    async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
        yield
        await app["session"].close()

    async def relay(request: web.Request) -> web.StreamResponse:
        async with request.app["session"].post(args.upstream + request.path, data=await request.read(),
                                               headers={"Content-Type": "application/json"}) as upstream:  # fmt: skip
            response = web.StreamResponse(
                status=upstream.status, headers={"Content-Type": upstream.headers["Content-Type"]}
            )
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            return response

    app = web.Application()
    app.cleanup_ctx.append(session_ctx)
    app.router.add_post("/v1/chat/completions", relay)
    _run(app, args.port)


if __name__ == "__main__":
    main()
