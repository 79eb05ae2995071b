"""Writes that must land although the request that started them may be cancelled.

A client that goes away cancels its handler; the journal write it started must still
complete, and shutdown must wait for it before the store closes. `stopping` says that
shutdown has begun, so a turn cut off now is `interrupted`, not `canceled` by its caller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("context_proxy.turn")


class PendingWrites:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopping = False

    def stop_accepting(self) -> None:
        """Shutdown has begun: requests still running are about to be cut off."""
        self.stopping = True

    async def run(self, write: Coroutine[Any, Any, None]) -> None:
        """Run `write` in its own task; cancelling the caller does not cancel it.

        As `asyncio.shield`, with one future and one callback (a turn's write is on every
        request's path): a write that fails after its caller left has its error taken, as
        shield does, so none is reported as never retrieved."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(write)
        self._tasks.add(task)
        waiter = loop.create_future()

        def done(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            if not waiter.done():
                waiter.set_result(None)
            elif not task.cancelled():
                task.exception()

        task.add_done_callback(done)
        await waiter
        task.result()

    async def drain(self, timeout_s: float) -> None:
        """Wait at most `timeout_s` for the writes still running; the ones still running then
        are logged and left to the store's close (their turns may not be journaled)."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        if pending:
            log.warning("%d journal writes did not land within %.1f s of shutdown", len(pending), timeout_s)
