"""Metrics for the whole server when it runs as several worker processes.

Each worker serves its own exposition text on a private unix socket in the server's run
directory (`worker-<index>.sock`, created by the parent, removed when it stops): connect,
read to EOF. The worker that answers a `/metrics` scrape reads every other worker's
text that way and merges it with its own (`proxy.metrics_merge`), so every series is a
total for the server, and adds `context_proxy_workers_reporting`, how many workers the
totals cover. A worker that does not answer within `_TIMEOUT_S` (dead, being restarted)
is left out and logged. A worker that dies takes its counts with it: the totals drop by
its share, which Prometheus reads as a counter reset (one `rate()` interval overcounts).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from proxy.metrics_merge import merge_expositions

log = logging.getLogger("context_proxy.workers")

_TIMEOUT_S = 2.0


def peer_socket(run_dir: Path, index: int) -> Path:
    """Where worker `index` serves its own metrics."""
    return run_dir / f"worker-{index}.sock"


class MetricPeers:
    """One worker's view of the server's workers: its own socket and everyone else's."""

    def __init__(self, run_dir: Path, index: int) -> None:
        self.run_dir = run_dir
        self.own = peer_socket(run_dir, index)

    async def serve(self, render: Callable[[], str]) -> asyncio.AbstractServer:
        """Answer each connection on this worker's socket with `render()`, then close it."""

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                writer.write(render().encode())
                await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        self.own.unlink(missing_ok=True)
        return await asyncio.start_unix_server(answer, path=str(self.own))

    async def totals(self, own_text: str) -> str:
        """`own_text` merged with the text of every other worker that answers."""
        peers = sorted(path for path in self.run_dir.glob("worker-*.sock") if path != self.own)
        texts = [own_text, *[text for text in await asyncio.gather(*map(_read, peers)) if text is not None]]
        reporting = (
            "# HELP context_proxy_workers_reporting Worker processes whose metrics these totals include.\n"
            "# TYPE context_proxy_workers_reporting gauge\n"
            f"context_proxy_workers_reporting {len(texts)}\n"
        )
        return merge_expositions(texts) + reporting


async def _read(path: Path) -> str | None:
    try:
        async with asyncio.timeout(_TIMEOUT_S):
            reader, writer = await asyncio.open_unix_connection(str(path))
            try:
                return (await reader.read()).decode()
            finally:
                writer.close()
    except (OSError, TimeoutError) as exc:
        log.warning("worker metrics at %s left out of the totals: %s", path.name, exc or type(exc).__name__)
        return None
