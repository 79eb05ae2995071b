"""Background compaction jobs: off the hot path, cancelled at shutdown with a bounded wait."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("context_proxy.compaction")


class BackgroundJobs:
    """Holds the running background compactions; at most one per session in this process."""

    def __init__(self) -> None:
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    def submit(self, session_key: str, job: Callable[[], Awaitable[None]]) -> bool:
        """Start `job` unless this session already has one running here, or shutdown has closed the jobs."""
        if self._closed or session_key in self._jobs:
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
        """Wait for the jobs running now (tests use it)."""
        while self._jobs:
            await asyncio.gather(*self._jobs.values(), return_exceptions=True)

    async def close(self, timeout_s: float) -> None:
        """Take no more jobs, cancel the running ones and wait for them at most `timeout_s`.

        A job that has not ended by then (its cancellation swallowed, say by a store call) is
        left behind with a warning: the session's history is unchanged by an unfinished job,
        and its compaction lock expires by itself."""
        self._closed = True
        jobs = list(self._jobs.values())
        for task in jobs:
            task.cancel()
        if not jobs:
            return
        _, pending = await asyncio.wait(jobs, timeout=timeout_s)
        if pending:
            log.warning(
                "%d background compactions did not end within %.1f s of shutdown; abandoned", len(pending), timeout_s
            )
