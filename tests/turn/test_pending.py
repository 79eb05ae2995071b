"""A turn's journal write outlives its caller's cancellation and reports its own failure."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from proxy.turn.pending import PendingWrites


async def test_a_write_lands_although_its_caller_is_cancelled() -> None:
    writes, landed = PendingWrites(), asyncio.Event()

    async def write() -> None:
        await asyncio.sleep(0.01)
        landed.set()

    caller = asyncio.create_task(writes.run(write()))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.wait_for(landed.wait(), 1)
    await writes.drain(1)


async def test_a_failed_write_raises_in_its_caller() -> None:
    async def write() -> None:
        await asyncio.sleep(0)
        raise ConnectionError("store lost")

    with pytest.raises(ConnectionError, match="store lost"):
        await PendingWrites().run(write())


async def test_a_write_that_fails_after_its_caller_left_is_not_reported_as_never_retrieved() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    writes = PendingWrites()

    async def write() -> None:
        await asyncio.sleep(0.01)
        raise ConnectionError("store lost")

    caller = asyncio.create_task(writes.run(write()))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await writes.drain(1)
    gc.collect()
    loop.set_exception_handler(None)
    assert not reported
