"""Running one application in this process: its event loop, GC tuning and graceful stop.

Both `serve` with one process and each worker of `serve --workers N` run the app through
`run_app`: SIGTERM or SIGINT stops accepting, lets in-flight requests finish for
`server.shutdown_timeout_s`, then runs the app's cleanup contexts (the journal writes
still pending land before the store closes).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
from collections.abc import Callable, Sequence

from aiohttp import web

from proxy.config import Settings

# The path cache holds many small, long-lived objects; the default thresholds make the
# cyclic collector walk them all every few thousand allocations. Requests allocate
# plenty but create few cycles, so the collector runs far less often.
_GC_THRESHOLDS = (50_000, 20, 100)


def run_app(
    app: web.Application,
    settings: Settings,
    *,
    on_listening: Callable[[], None],
    sockets: Sequence[socket.socket] = (),
) -> None:
    """Serve `app` until SIGTERM/SIGINT, on `sockets` if given, else on `server.host`:`server.port`.

    `on_listening` is called once the app has started and every socket accepts."""
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    gc.set_threshold(*_GC_THRESHOLDS)
    web.run_app(
        app,
        host=None if sockets else settings.server.host,
        port=None if sockets else settings.server.port,
        sock=list(sockets) or None,
        shutdown_timeout=settings.server.shutdown_timeout_s,
        handler_cancellation=True,
        access_log=None,
        loop=loop,
        print=lambda text: on_listening(),
    )
