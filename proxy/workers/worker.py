"""One worker process of `serve --workers N`: the same app as `serve`, plus what ties it to the server.

A worker is forked by the supervisor (`proxy.workers.supervisor`) with its listening
sockets already bound; it adds to the app the private socket its metrics are read from
(`proxy.metrics_peers`), tells the supervisor when it accepts, and drains itself as a
single process does (SIGTERM) if the supervisor disappears without stopping it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from aiohttp import web

from proxy.app import CleanupContext, create_app
from proxy.app_state import PEERS, SETTINGS
from proxy.config import Settings
from proxy.errors import ConfigError, StoreUnavailable
from proxy.handlers.health import exposition
from proxy.metrics_peers import MetricPeers
from proxy.serving import await_within, cleanup_bound_s, run_app
from proxy.types import frozen

log = logging.getLogger("context_proxy.workers")


@frozen
class Slot:
    """What a worker gets from the supervisor besides settings and sockets."""

    index: int
    run_dir: Path
    lifeline: int
    """Read end of a pipe only the supervisor writes to: EOF means the supervisor is gone."""
    ready: int
    """Write end of the pipe on which a worker announces (its pid, a line) that it accepts."""


def run_worker(settings: Settings, sockets: Sequence[socket.socket], slot: Slot) -> int:
    """Serve until SIGTERM; the process exit status (a start failure is printed, as `serve` prints it)."""
    app = create_app(settings)
    app[PEERS] = MetricPeers(slot.run_dir, slot.index)
    app.cleanup_ctx.extend([_private_metrics, _watch_supervisor(slot.lifeline)])
    try:
        run_app(app, settings, sockets=sockets, on_listening=lambda: _announce(slot.ready))
    except (StoreUnavailable, ConfigError, OSError) as exc:
        print(f"context-proxy: worker {slot.index}: {exc}", file=sys.stderr)
        return 1
    return 0


async def _private_metrics(app: web.Application) -> AsyncIterator[None]:
    peers = app[PEERS]
    server = await peers.serve(lambda: exposition(app))
    yield
    server.close()
    await await_within(cleanup_bound_s(app[SETTINGS]), server.wait_closed(), "closing the metrics socket")
    peers.own.unlink(missing_ok=True)


def _watch_supervisor(lifeline: int) -> CleanupContext:
    async def watch(app: web.Application) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()

        def orphaned() -> None:
            loop.remove_reader(lifeline)
            log.warning("the supervisor is gone; worker pid=%s drains and stops", os.getpid())
            os.kill(os.getpid(), signal.SIGTERM)

        loop.add_reader(lifeline, orphaned)
        yield
        loop.remove_reader(lifeline)

    return watch


def _announce(ready: int) -> None:
    os.write(ready, f"{os.getpid()}\n".encode())
    os.close(ready)
