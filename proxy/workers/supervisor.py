"""`serve --workers N`: N worker processes on one port, one shared Redis, one drain.

The supervisor (the process `serve` started) does no HTTP itself. It starts the embedded
server once when `redis.url` is `embedded` and hands its socket URL to every worker, so
no worker starts its own; binds the port once, to hold it (and to learn it when the port
is 0); then forks the workers. Each worker gets its own listening sockets bound to that
port with SO_REUSEPORT, so the kernel spreads new connections evenly over the workers
(with one shared socket, an event loop that wakes first accepts every connection that
is waiting, and a burst of new connections lands on one worker).

SIGTERM or SIGINT is passed to every worker once; each stops as a single process does
(stops accepting, finishes in-flight requests and journal writes within
`server.shutdown_timeout_s`, the whole stop within `proxy.serving.stop_bound_s`); a worker
still running `_GRACE_S` after that bound is killed. Then the embedded server is stopped,
once (killed if it does not stop within one cleanup step). A second signal is only logged:
every stop is bounded already. A worker that dies on its own is logged and replaced;
one that fails before it accepts (Redis unreachable, say) stops the whole server with
status 1 instead of being restarted over and over. Workers live in their own process
group, so a terminal's Ctrl-C reaches only the supervisor (it passes the signal on once),
and drain by themselves if the supervisor vanishes (see `proxy.workers.worker`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import selectors
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from proxy.config import Settings
from proxy.metrics_peers import peer_socket
from proxy.serving import cleanup_bound_s, stop_bound_s
from proxy.store import EmbeddedRedis
from proxy.workers.worker import Slot, run_worker

log = logging.getLogger("context_proxy.workers")

_GRACE_S = 2.0
"""How long past its own stop bound a worker may take to exit (its interpreter's exit)."""
_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}


def serve_workers(settings: Settings, *, on_listening: Callable[[int], None]) -> int:
    """Run `server.workers` workers until SIGTERM/SIGINT; the exit status (0 once all drained cleanly).

    `on_listening(port)` is called once every worker accepts."""
    embedded = None
    url = settings.redis.url
    if url == "embedded":
        embedded = EmbeddedRedis(settings.redis.data_dir)
        url = asyncio.run(embedded.start())
    try:
        shared = dataclasses.replace(settings, redis=dataclasses.replace(settings.redis, url=url))
        with tempfile.TemporaryDirectory(prefix="context-proxy-") as run_dir:
            return _Supervisor(shared, Path(run_dir), on_listening).run()
    finally:
        if embedded is not None:
            asyncio.run(embedded.stop(cleanup_bound_s(settings)))


@dataclass
class _Worker:
    index: int
    pid: int
    accepting: bool = False


class _Supervisor:
    def __init__(self, settings: Settings, run_dir: Path, on_listening: Callable[[int], None]) -> None:
        self.settings = settings
        self.run_dir = run_dir
        self.on_listening = on_listening
        self.reserved = bind(settings.server.host, settings.server.port)
        self.port = int(self.reserved[0].getsockname()[1])
        self.workers: dict[int, _Worker] = {}
        self.status = 0
        self.deadline: float | None = None
        self.announced = False
        self.signals_r, self.signals_w = os.pipe()
        self.lifeline_r, self.lifeline_w = os.pipe()
        self.ready_r, self.ready_w = os.pipe()
        for fd in (self.signals_r, self.signals_w, self.ready_r):
            os.set_blocking(fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.signals_r, selectors.EVENT_READ)
        self.selector.register(self.ready_r, selectors.EVENT_READ)

    def run(self) -> int:
        previous_fd = signal.set_wakeup_fd(self.signals_w, warn_on_full_buffer=False)
        previous = {sig: signal.signal(sig, _noted) for sig in _SIGNALS}
        try:
            for index in range(self.settings.server.workers):
                self._spawn(index)
            while self.workers:
                timeout = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
                for key, _ in self.selector.select(timeout):
                    if key.fd == self.signals_r:
                        for signum in os.read(self.signals_r, 512):
                            self._on_signal(signum)
                    else:
                        self._on_ready(os.read(self.ready_r, 4096))
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    self._kill_stragglers()
            return self.status
        finally:
            self.selector.close()
            signal.set_wakeup_fd(previous_fd)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for sock in self.reserved:
                sock.close()
            for fd in (self.signals_r, self.signals_w, self.lifeline_r, self.lifeline_w, self.ready_r, self.ready_w):
                os.close(fd)

    def _spawn(self, index: int) -> None:
        sockets = bind(self.settings.server.host, self.port)
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                self._become_worker(index, sockets)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        for sock in sockets:
            sock.close()
        self.workers[pid] = _Worker(index, pid)
        log.info("worker %d started pid=%d", index, pid)

    def _become_worker(self, index: int, sockets: list[socket.socket]) -> NoReturn:
        """In the forked child: shed the supervisor's signal handling and descriptors, then serve."""
        status = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in _SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
            os.setpgid(0, 0)
            self.selector.close()
            for fd in (self.signals_r, self.signals_w, self.lifeline_w, self.ready_r):
                os.close(fd)
            for sock in self.reserved:
                sock.close()
            slot = Slot(index=index, run_dir=self.run_dir, lifeline=self.lifeline_r, ready=self.ready_w)
            status = run_worker(self.settings, sockets, slot)
        except BaseException:
            log.exception("worker %d failed", index)
        finally:
            try:
                for handler in logging.getLogger().handlers:  # lines that wait for a loop's turn (`logs.py`)
                    handler.flush()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)

    def _on_signal(self, signum: int) -> None:
        if signum == signal.SIGCHLD:
            self._reap()
        elif self.deadline is None:
            log.info("%s: draining %d workers", signal.Signals(signum).name, len(self.workers))
            self._drain()
        else:
            log.info("%s again: the workers are already stopping", signal.Signals(signum).name)

    def _on_ready(self, data: bytes) -> None:
        for line in data.split():
            worker = self.workers.get(int(line))
            if worker is not None:
                worker.accepting = True
        if not self.announced and self.workers and all(w.accepting for w in self.workers.values()):
            self.announced = True
            self.on_listening(self.port)

    def _reap(self) -> None:
        for pid, worker in list(self.workers.items()):
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            del self.workers[pid]
            peer_socket(self.run_dir, worker.index).unlink(missing_ok=True)
            how = _describe(os.waitstatus_to_exitcode(wait_status))
            if self.deadline is not None:
                log.info("worker %d pid=%d stopped (%s)", worker.index, pid, how)
                if how != "exit status 0":
                    self.status = 1
            elif not worker.accepting:
                log.error("worker %d pid=%d failed to start (%s); stopping the server", worker.index, pid, how)
                self.status = 1
                self._drain()
            else:
                log.error("worker %d pid=%d died (%s); starting a new one", worker.index, pid, how)
                self._spawn(worker.index)

    def _drain(self) -> None:
        self.deadline = time.monotonic() + stop_bound_s(self.settings) + _GRACE_S
        self._signal_all(signal.SIGTERM)

    def _signal_all(self, signum: int) -> None:
        for pid in self.workers:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _kill_stragglers(self) -> None:
        for pid, worker in list(self.workers.items()):
            log.error("worker %d pid=%d still running after the drain; killed", worker.index, pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            del self.workers[pid]
        self.status = 1


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound (not yet listening) to every address of `host` on one port, with SO_REUSEPORT."""
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _describe(exit_code: int) -> str:
    return f"killed by {signal.Signals(-exit_code).name}" if exit_code < 0 else f"exit status {exit_code}"


def _noted(signum: int, frame: object) -> None:
    """A Python-level handler, so that the signal's number reaches the wakeup pipe."""
