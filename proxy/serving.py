"""Running one application in this process: its event loop, GC tuning and a bounded graceful stop.

Both `serve` with one process and each worker of `serve --workers N` run the app through
`run_app`. SIGTERM or SIGINT starts the stop, which always ends within `stop_bound_s`
(`server.shutdown_timeout_s` plus five `cleanup_bound_s` steps), whatever is in flight:

1. stop accepting (listening sockets closed, idle keep-alive connections closed, the
   app's `on_shutdown` hooks run);
2. drain: in-flight requests get `server.shutdown_timeout_s` to finish, then are
   cancelled and get one step to record what they did (a cut-off turn is `interrupted`);
3. the app's cleanup contexts, in reverse start order, each step of them bounded by
   `cleanup_bound_s` (the journal writes still pending land before the store closes,
   and the embedded server is stopped, or killed);
4. if the cleanup did not end within two steps, the embedded server is stopped anyway;
5. every task still running is cancelled and gets one step to end; what remains is
   abandoned with a warning, and the process exits.

No step waits for a cancelled task to end: a task that swallows its cancellation (redis-py
can return normally from a command that was cancelled) is left behind, not awaited. A
second signal during the stop is logged; the stop is bounded already.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from proxy.app_state import EMBEDDED
from proxy.config import Settings

log = logging.getLogger("context_proxy")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The path cache holds many small, long-lived objects; the default thresholds make the
# cyclic collector walk them all every few thousand allocations. Requests allocate
# plenty but create few cycles, so the collector runs far less often.
_GC_THRESHOLDS = (50_000, 20, 100)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_STEPS = 5
"""Steps of `cleanup_bound_s` a stop may take after the drain: cut-off requests, the cleanup
contexts (two), the embedded server, the remaining tasks."""


def cleanup_bound_s(settings: Settings) -> float:
    """How long one step of a stop may take after the drain: a tenth of
    `server.shutdown_timeout_s`, at least 0.5 s, at most 2 s."""
    return min(max(settings.server.shutdown_timeout_s / 10, 0.5), 2.0)


def stop_bound_s(settings: Settings) -> float:
    """The longest a stop takes from the signal to the end of `run_app`."""
    return settings.server.shutdown_timeout_s + _STEPS * cleanup_bound_s(settings)


async def await_within(timeout_s: float, step: Awaitable[Any], what: str) -> bool:
    """Run `step`, waiting at most `timeout_s`; True if it ended (with any outcome) in time.

    A step that takes longer is cancelled and left behind, not awaited (its cancellation may
    be swallowed), and logged as abandoned. A step's own exception is logged, not raised:
    a stop goes on with its next step."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        task.cancel()
        log.warning("stopping: %s did not end within %.1f s; abandoned", what, timeout_s)
        return False
    if not task.cancelled() and task.exception() is not None:
        log.error("stopping: %s failed", what, exc_info=task.exception())
    return True


def run_app(
    app: web.Application,
    settings: Settings,
    *,
    on_listening: Callable[[], None],
    sockets: Sequence[socket.socket] = (),
) -> None:
    """Serve `app` until SIGTERM/SIGINT, on `sockets` if given, else on `server.host`:`server.port`.

    `on_listening` is called once the app has started and every socket accepts. A failure
    to start (the store unreachable, a refused config) is raised after what had started
    is cleaned up."""
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    gc.set_threshold(*_GC_THRESHOLDS)
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve(app, settings, on_listening, sockets))
    finally:
        asyncio.set_event_loop(None)
        loop.close()


class _InFlight:
    """The tasks handling a request now: an outermost middleware adds and removes them, so
    that a stop can wait for them, then cancel the ones still running."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.tasks.add(request.task)
        self._idle.clear()
        try:
            return await handler(request)
        finally:
            self.tasks.discard(request.task)
            if not self.tasks:
                self._idle.set()

    async def drain(self, drain_s: float, cut_off_s: float) -> None:
        """Wait at most `drain_s` for the requests to end; cancel the ones still running and
        wait at most `cut_off_s` for them (a cut-off turn journals itself as `interrupted`)."""
        idle = asyncio.ensure_future(self._idle.wait())
        await asyncio.wait({idle}, timeout=drain_s)
        idle.cancel()
        cut = set(self.tasks)
        if not cut:
            return
        log.warning("stopping: %d requests still running after %.1f s; cut off", len(cut), drain_s)
        for task in cut:
            task.cancel()
        _, pending = await asyncio.wait(cut, timeout=cut_off_s)
        if pending:
            log.warning("stopping: %d cut-off requests did not end within %.1f s; abandoned", len(pending), cut_off_s)


async def _serve(
    app: web.Application, settings: Settings, on_listening: Callable[[], None], sockets: Sequence[socket.socket]
) -> None:
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def on_signal(signum: signal.Signals) -> None:
        if stopping.is_set():
            log.info("%s again: already stopping (within %.1f s)", signum.name, stop_bound_s(settings))
        stopping.set()

    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    in_flight = _InFlight()
    app.middlewares.insert(0, in_flight.middleware)
    runner = web.AppRunner(app, handle_signals=False, handler_cancellation=True, access_log=None)
    try:
        try:
            await runner.setup()
        except BaseException:
            await _clean_up(app, settings)
            raise
        try:
            if sockets:
                sites: list[web.BaseSite] = [web.SockSite(runner, sock) for sock in sockets]
            else:
                sites = [web.TCPSite(runner, settings.server.host, settings.server.port)]
            for site in sites:
                await site.start()
            on_listening()
            await stopping.wait()
        finally:
            await _stop(runner, in_flight, settings)
    finally:
        for signum in _STOP_SIGNALS:
            loop.remove_signal_handler(signum)
    await _abandon_the_rest(cleanup_bound_s(settings))


async def _stop(runner: web.AppRunner, in_flight: _InFlight, settings: Settings) -> None:
    """Steps 1 to 4 of the module docstring."""
    loop = asyncio.get_running_loop()
    step_s = cleanup_bound_s(settings)
    for site in runner.sites:
        await site.stop()
    server = runner.server
    if server is not None:
        server.pre_shutdown()
    await await_within(step_s, runner.app.shutdown(), "the on_shutdown hooks")
    cut_off_by = loop.time() + settings.server.shutdown_timeout_s + step_s
    await in_flight.drain(settings.server.shutdown_timeout_s, step_s)
    if server is not None:
        left_s = max(cut_off_by - loop.time(), 0.0)
        await await_within(left_s, server.shutdown(left_s), "closing the connections")
    await _clean_up(runner.app, settings)


async def _clean_up(app: web.Application, settings: Settings) -> None:
    step_s = cleanup_bound_s(settings)
    if not await await_within(2 * step_s, app.cleanup(), "the cleanup contexts"):
        embedded = app.get(EMBEDDED)
        if embedded is not None:
            await await_within(step_s, embedded.stop(step_s), "the embedded server's stop")


async def _abandon_the_rest(timeout_s: float) -> None:
    """Step 5: cancel what still runs (requests cut off, writes and jobs given up on), then
    close the async generators left open, within `timeout_s` in all."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for task in tasks:
        task.cancel()
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=timeout_s / 2)
        for task in pending:
            log.warning("stopping: task %s did not end when cancelled; abandoned", task.get_coro())
    await await_within(max(deadline - loop.time(), 0.0), loop.shutdown_asyncgens(), "closing async generators")
