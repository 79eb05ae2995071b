"""Background compaction jobs: off the hot path, cancelled and awaited at shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("context_proxy.compaction")


class BackgroundJobs:
    """Holds the running background compactions; at most one per session in this process."""

    def __init__(self) -> None:
        self._jobs: dict[str, asyncio.Task[None]] = {}

    def submit(self, session_key: str, job: Callable[[], Awaitable[None]]) -> bool:
        """Start `job` unless this session already has one running here."""
        if session_key in self._jobs:
            return False
        task = asyncio.create_task(self._run(session_key, job))
        self._jobs[session_key] = task
        return True

    async def _run(self, session_key: str, job: Callable[[], Awaitable[None]]) -> None:
        try:
            await job()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background compaction failed for %s", session_key)
        finally:
            self._jobs.pop(session_key, None)

    async def idle(self) -> None:
        """Wait for the jobs running now (tests and shutdown use it)."""
        while self._jobs:
            await asyncio.gather(*self._jobs.values(), return_exceptions=True)

    async def close(self) -> None:
        jobs = list(self._jobs.values())
        for task in jobs:
            task.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
