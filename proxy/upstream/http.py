"""HTTP/1.1 to one upstream origin, over keep-alive connections: the upstream client's transport.

Written for the proxy's one kind of call (a request to a known origin, an answer read whole or
relayed as it arrives), it spends about a third of the CPU of aiohttp's client on a call, which
every managed turn pays. What it does:

- A pool of at most `max_connections`, reused last-in first-out; a connection idle for
  `idle_s` is closed rather than reused (servers drop idle connections on their own clock).
- A request is written in one go: its head, then its body as bytes or, from an async
  iterable of unknown length, chunked.
- An answer is framed by `Content-Length`, by chunked transfer coding, or by the end of the
  connection; 1xx interim answers are skipped. Its body is not decoded (a gzip answer is
  relayed as gzip).
- A connection goes back to the pool only when its answer was read to the end and neither
  side asked to close it.
- A request on a reused connection that the upstream closed before answering (it timed the
  connection out as the request left) is sent once more on a new connection, when that is
  safe: nothing of it was written yet, or it is idempotent (GET, HEAD, OPTIONS, or it carries
  an `Idempotency-Key`) with a body that can be sent again. A POST is never sent twice.
- An upload whose answer begins before it ends (an early 413) stops there; the connection
  is then not reused.
- A new connection tries the origin's addresses in turn, a new attempt every 250 ms while
  none has connected (happy eyeballs, RFC 8305), so a black-holed IPv6 address costs 250 ms.

Errors: `TimeoutError` when connecting takes longer than `connect_timeout_s`, when the
upstream is silent for `read_timeout_s`, or at the request's deadline (the whole exchange,
waiting for a connection and reading the body included); any other failure is an `OSError`
(`ConnectionError`, `ssl.SSLError`, and `ProtocolError` for an answer that is not HTTP/1.1).
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

_MAX_HEAD = 64 * 1024
"""The most an answer's status line and headers may take (aiohttp's limit is 8 KB a line)."""
_HIGH_WATER = 256 * 1024
"""Read no more from the socket while this much of an answer waits for its reader."""
_NO_BODY = frozenset((204, 304))
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_IDEMPOTENT = frozenset(("GET", "HEAD", "OPTIONS", "TRACE"))
_ATTEMPT_DELAY_S = 0.25
"""Happy eyeballs: how long one address has before the next is tried too."""


class ProtocolError(ConnectionError):
    """The upstream answered something this client does not read as HTTP/1.1."""


Body = bytes | AsyncIterable[bytes] | None


class Pool:
    """Keep-alive connections to the origin of `base_url` (http or https)."""

    def __init__(self, base_url: str, *, max_connections: int, connect_timeout_s: float, idle_s: float = 15.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.path = parts.path.rstrip("/")
        """The base URL's path, which every request's target starts with."""
        default_port = self.port == (443 if self.tls else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = host if default_port else f"{host}:{self.port}"
        self._ssl = ssl.create_default_context() if self.tls else None
        self._limit = max_connections
        self._connect_timeout_s = connect_timeout_s
        self._idle_s = idle_s
        self._busy = 0
        self._idle: list[_Connection] = []
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def request(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: Body,
        *,
        timeout_s: float,
        read_timeout_s: float | None,
    ) -> Response:
        """Send one request (`target`: the path after the base URL's, with its query) and
        read its answer's head. The caller reads the body to its end, or `close()`s it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        headers = list(headers)
        head = _head(method, self.path + target, self.authority, headers, body)
        await self._acquire(deadline)
        connection = None
        try:
            connection = await self._checkout(deadline)
            try:
                return await connection.exchange(method, head, body, deadline, read_timeout_s)
            except _Stale as stale:
                if stale.sent and not _replayable(method, headers, body):
                    raise ConnectionError("the upstream closed the connection without an answer") from None
                connection.close()
                connection = await self._connect(deadline)
                return await connection.exchange(method, head, body, deadline, read_timeout_s)
        except BaseException:
            if connection is not None:
                connection.close()
            self._release()
            raise

    async def close(self) -> None:
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_exception(ConnectionError("the upstream client is closed"))

    def put_back(self, connection: _Connection, reusable: bool) -> None:
        """A request's answer is done with: keep its connection for the next, or close it."""
        if reusable and not self._closed and connection.alive:
            connection.rest()
            self._idle.append(connection)
        else:
            connection.close()
        self._release()

    def forget(self, connection: _Connection) -> None:
        """An idle connection the upstream closed."""
        if connection in self._idle:
            self._idle.remove(connection)

    async def _acquire(self, deadline: float) -> None:
        """A place among the `max_connections`, waiting for one until the deadline. A place
        given up goes to the longest waiter, not to whoever asks next."""
        if self._closed:
            raise ConnectionError("the upstream client is closed")
        while self._waiting and self._waiting[0].done():
            self._waiting.popleft()  # a waiter that timed out, not yet resumed to leave
        if self._busy < self._limit and not self._waiting:
            self._busy += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await _until(waiter, deadline)  # its result: the place is this caller's
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release()  # handed the place, but leaving: it goes to the next in line
            raise
        finally:
            if waiter in self._waiting:
                self._waiting.remove(waiter)

    def _release(self) -> None:
        """Give a place up: to the longest waiter, else back to the pool's count."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._busy -= 1

    async def _checkout(self, deadline: float) -> _Connection:
        now = asyncio.get_running_loop().time()
        while self._idle:
            connection = self._idle.pop()
            if connection.alive and now - connection.idle_since < self._idle_s:
                return connection
            connection.close()
        return await self._connect(deadline)

    async def _connect(self, deadline: float) -> _Connection:
        loop = asyncio.get_running_loop()
        budget = min(self._connect_timeout_s, deadline - loop.time())
        if budget <= 0:
            raise TimeoutError
        async with asyncio.timeout(budget):
            infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            return await self._first_to_connect(_interleaved(infos))

    async def _first_to_connect(self, addresses: list[str]) -> _Connection:
        """Start an attempt on each address in turn, the next after 250 ms or at once when one
        fails; the first to connect wins and the others are called off (or closed)."""
        loop = asyncio.get_running_loop()
        attempts: set[asyncio.Future[tuple[asyncio.BaseTransport, _Connection]]] = set()
        errors: list[BaseException] = []
        waiting = list(reversed(addresses))
        try:
            while waiting or attempts:
                if waiting:
                    attempts.add(
                        asyncio.ensure_future(
                            loop.create_connection(
                                lambda: _Connection(self),
                                waiting.pop(),
                                self.port,
                                ssl=self._ssl,
                                server_hostname=self.host if self._ssl else None,
                            )
                        )
                    )
                done, attempts = await asyncio.wait(
                    attempts, timeout=_ATTEMPT_DELAY_S if waiting else None, return_when=asyncio.FIRST_COMPLETED
                )
                for attempt in done:
                    if (error := attempt.exception()) is not None:
                        errors.append(error)
                    else:
                        attempts |= done - {attempt}  # closed below if they connected too
                        return attempt.result()[1]
            raise errors[0] if len(errors) == 1 else OSError(f"no address of {self.host} answered: {errors}")
        finally:
            for attempt in attempts:
                if attempt.done() and not attempt.cancelled() and attempt.exception() is None:
                    attempt.result()[0].close()
                else:
                    attempt.cancel()


class Response:
    """An answer: its status and headers, and its body to read."""

    def __init__(self, connection: _Connection, status: int, headers: CIMultiDictProxy[str], framing: _Framing) -> None:
        self.status = status
        self.headers = headers
        self._connection = connection
        self._framing = framing
        self._done = False

    @property
    def content_length(self) -> int | None:
        """The `Content-Length` the upstream sent (None for a chunked answer, which has none)."""
        value = self.headers.get("Content-Length", "")
        return int(value) if _is_length(value) and not isinstance(self._framing, _Chunked) else None

    async def read(self) -> bytes:
        parts = [chunk async for chunk in self.iter_chunks()]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; the connection is released at its end."""
        if self._done:
            return
        try:
            while (chunk := await self._framing.next(self._connection)) is not None:
                if chunk:
                    yield chunk
        except BaseException:
            self.close()
            raise
        self._done = True
        connection = self._connection
        spent = connection.buffer or connection.upload_cut  # bytes past the end; an upload cut short
        connection.pool.put_back(connection, self._framing.reusable and not spent)

    def close(self) -> None:
        """Drop the connection unless the body was read to its end."""
        if not self._done:
            self._done = True
            self._connection.pool.put_back(self._connection, False)

    def __del__(self) -> None:
        # An answer dropped unread and unclosed (a code path that forgot it) still gives its
        # place in the pool back, as aiohttp's responses do.
        if not self._done:
            self._done = True
            self._connection.abandon()


class _Stale(Exception):
    """A reused connection closed before any answer: the request may go again on a new one if
    nothing of it was `sent`, or if it is idempotent."""

    def __init__(self, *, sent: bool) -> None:
        self.sent = sent


class _Connection(asyncio.Protocol):
    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self._loop = asyncio.get_running_loop()  # made by the protocol factory, on the loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.idle_since = 0.0
        self.used = False
        """Has carried a request before (so a close before the answer may be the upstream's idle timeout)."""
        self.received = False
        """Some of the current request's answer has come."""
        self.alive = True
        self.pooled = False
        """Idle in the pool: bytes that come now answer no request, and end the connection."""
        self.upload_cut = False
        """The answer began before the upload ended, which was stopped: the connection is spent."""
        self.lost: Exception | None = None
        self._deadline = 0.0
        self._read_timeout_s: float | None = None
        """The current exchange's: when it must end, and the longest silence in it."""
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._writable: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        if self.pooled:
            self.close()
            return
        self.buffer += data
        self.received = True
        if len(self.buffer) > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()
        self._let_write()  # an upload waiting to write: the answer has begun

    def eof_received(self) -> bool:
        self.alive = False
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        self.lost = exc
        self._wake()
        self._let_write()
        self.pool.forget(self)

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._let_write()
        self._writable = None

    def close(self) -> None:
        self.alive = False
        if self.transport is not None:
            self.transport.close()

    def rest(self) -> None:
        """Go idle in the pool, reading again (to see the upstream close it)."""
        self.idle_since = self._loop.time()
        self.pooled = True
        self._resume_reading()

    def abandon(self) -> None:
        """Close and give back the place of an answer nobody will read: from a finalizer, which
        the collector may run on any thread, so through the loop."""
        try:
            self._loop.call_soon_threadsafe(self.pool.put_back, self, False)
        except RuntimeError:
            pass  # the event loop is gone, and the pool with it

    def _writing(self) -> bool:
        """Can more of the request go out? (uvloop refuses a write on a lost connection.)"""
        return self.alive and self.transport is not None and not self.transport.is_closing()

    async def exchange(
        self, method: str, head: bytes, body: Body, deadline: float, read_timeout_s: float | None
    ) -> Response:
        reused, self.used, self.received, self.pooled = self.used, True, False, False
        self._deadline, self._read_timeout_s = deadline, read_timeout_s
        if not self._writing():
            if reused:
                raise _Stale(sent=False)
            raise ConnectionError("the upstream closed the connection")
        assert self.transport is not None
        if isinstance(body, AsyncIterable):
            self.transport.write(head)
            async with asyncio.timeout_at(deadline):
                await self._write_chunked(body)
        else:
            self.transport.writelines((head, body) if body else (head,))
        try:
            return await self._read_answer(method)
        except ProtocolError:
            raise
        except ConnectionError:
            if reused and not self.received and not isinstance(body, AsyncIterable):
                raise _Stale(sent=True) from None
            raise

    async def _write_chunked(self, body: AsyncIterable[bytes]) -> None:
        """Send the body chunked, until its end, or until the answer begins or the upstream
        closes (the answer, if any, says why)."""
        assert self.transport is not None
        try:
            async for chunk in body:
                if self._upload_stops():
                    return
                if chunk:
                    self.transport.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                if self._writable is not None:
                    await self._writable
        except (OSError, asyncio.CancelledError):
            raise
        except Exception as exc:  # the client's own upload failed (aiohttp's payload errors)
            raise ConnectionError(f"reading the request body to send failed: {exc}") from exc
        if not self._upload_stops():
            self.transport.write(b"0\r\n\r\n")

    def _upload_stops(self) -> bool:
        """Has the answer begun, or the connection ended? Then the upload is cut, not finished."""
        self.upload_cut = self.received or not self._writing()
        return self.upload_cut

    async def _read_answer(self, method: str) -> Response:
        while True:
            end = await self.find(b"\r\n\r\n")
            head = bytes(self.buffer[:end]).decode("utf-8", "replace")
            del self.buffer[: end + 4]
            status, headers, version = _parse_head(head)
            if 100 <= status < 200 and status != 101:
                continue  # 100 Continue, 103 Early Hints: the answer follows
            break
        framing = _framing(method, status, headers, version)
        return Response(self, status, CIMultiDictProxy(headers), framing)

    async def find(self, needle: bytes) -> int:
        """Where `needle` starts in the buffer (within `_MAX_HEAD`), waiting for more until it is there."""
        start = 0
        while (at := self.buffer.find(needle, start)) < 0 and len(self.buffer) <= _MAX_HEAD:
            start = max(0, len(self.buffer) - len(needle) + 1)
            await self.more()
        if at < 0 or at > _MAX_HEAD:
            raise ProtocolError(f"the upstream's answer has a line or head of over {_MAX_HEAD} bytes")
        return at

    async def more(self) -> None:
        """Wait for more bytes of the answer: ConnectionError if there will be none."""
        if not self.alive:
            raise ConnectionError("the upstream closed the connection") from self.lost
        waiter = self._waiter = self._loop.create_future()
        self._resume_reading()
        try:
            await _until(waiter, self._deadline, self._read_timeout_s)
        finally:
            self._waiter = None

    def take(self, at_most: int) -> bytes:
        piece = bytes(self.buffer[:at_most])
        del self.buffer[:at_most]
        return piece

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _let_write(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def _resume_reading(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()


class _Length:
    """A body of `Content-Length` bytes (zero for an answer that has none)."""

    reusable = True

    def __init__(self, length: int) -> None:
        self._left = length

    async def next(self, connection: _Connection) -> bytes | None:
        if self._left == 0:
            return None
        if not connection.buffer:
            await connection.more()
        piece = connection.take(self._left)
        self._left -= len(piece)
        return piece


class _UntilClose:
    """A body that ends with the connection (no length, not chunked)."""

    reusable = False

    async def next(self, connection: _Connection) -> bytes | None:
        if not connection.buffer:
            try:
                await connection.more()
            except ConnectionError:
                if connection.lost is not None:
                    raise  # a reset, not the end
                return None
        return connection.take(len(connection.buffer))


class _Chunked:
    """A body in chunked transfer coding: each chunk's size line, its bytes, a CRLF; then trailers."""

    reusable = True

    def __init__(self) -> None:
        self._left = 0
        """Bytes of the current chunk still to come."""
        self._crlf_due = False
        """The CRLF after a chunk's bytes, read with the next size line (so a chunk is passed on at once)."""
        self._ended = False

    async def next(self, connection: _Connection) -> bytes | None:
        if self._ended:
            return None
        if self._left == 0:
            if self._crlf_due:
                if await self._line(connection):
                    raise ProtocolError("the upstream's chunk is longer than its size")
                self._crlf_due = False
            size = await self._line(connection)
            digits = size.split(b";", 1)[0].strip(b" \t")
            if not _CHUNK_SIZE.fullmatch(digits):
                raise ProtocolError(f"the upstream sent a bad chunk size: {size[:40]!r}")
            self._left = int(digits, 16)
            if self._left == 0:
                while await self._line(connection):
                    pass  # trailers, up to the empty line
                self._ended = True
                return None
        if not connection.buffer:
            await connection.more()
        piece = connection.take(self._left)
        self._left -= len(piece)
        self._crlf_due = self._left == 0
        return piece

    async def _line(self, connection: _Connection) -> bytes:
        end = await connection.find(b"\r\n")
        line = connection.take(end)
        del connection.buffer[:2]
        return line


_Framing = _Length | _UntilClose | _Chunked


def _framing(method: str, status: int, headers: CIMultiDict[str], version: str) -> _Framing:
    """How the answer's body ends, and whether its connection can carry another request."""
    codings = _tokens(headers, "Transfer-Encoding")
    if method == "HEAD" or status in _NO_BODY:
        framing: _Framing = _Length(0)
    elif codings and codings[-1] == "chunked":
        framing = _Chunked()
        framing.reusable = "Content-Length" not in headers  # both: a sign of smuggling (RFC 9112 6.3)
    elif codings:
        return _UntilClose()  # a transfer coding that does not end in chunked
    elif (length := headers.getall("Content-Length", None)) is not None:
        if len(set(length)) != 1 or not _is_length(length[0]):
            raise ProtocolError(f"the upstream sent a bad Content-Length: {length!r}")
        framing = _Length(int(length[0]))
    else:
        return _UntilClose()
    if version != "HTTP/1.1" or "close" in _tokens(headers, "Connection"):
        framing.reusable = False
    return framing


def _tokens(headers: CIMultiDict[str], name: str) -> list[str]:
    """A comma-separated header's tokens, lowercased, on however many lines it came."""
    return [t.strip().lower() for line in headers.getall(name, ()) for t in line.split(",") if t.strip()]


def _interleaved(infos: Sequence[tuple[Any, ...]]) -> list[str]:
    """The addresses of getaddrinfo's answer, one family then the other (RFC 8305), in its order."""
    families: dict[object, list[str]] = {}
    for info in infos:
        address = str(info[4][0])
        listed = families.setdefault(info[0], [])
        if address not in listed:
            listed.append(address)
    ordered: list[str] = []
    queues = list(families.values())
    while any(queues):
        for queue in queues:
            if queue:
                ordered.append(queue.pop(0))
    return ordered


def _replayable(method: str, headers: list[tuple[str, str]], body: Body) -> bool:
    """May this request go twice? An idempotent method, or an idempotency key (as Go's net/http
    decides), with a body that can be sent again."""
    keyed = any(name.lower() in ("idempotency-key", "x-idempotency-key") for name, _ in headers)
    return not isinstance(body, AsyncIterable) and (method in _IDEMPOTENT or keyed)


def _is_length(value: str) -> bool:
    """ASCII digits only (`isdigit` alone takes "²", which `int` refuses)."""
    return value.isascii() and value.isdigit()


def _parse_head(head: str) -> tuple[int, CIMultiDict[str], str]:
    lines = head.split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or len(code) != 3 or not _is_length(code) or rest[3:4] not in ("", " "):
        raise ProtocolError(f"the upstream's answer does not start with an HTTP/1 status line: {lines[0][:80]!r}")
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name[0] in " \t" or name != name.rstrip():
            raise ProtocolError(f"the upstream sent a bad header line: {line[:80]!r}")
        headers.add(name, value.strip(" \t"))
    return int(code), headers, version


def _head(method: str, target: str, authority: str, headers: Iterable[tuple[str, str]], body: Body) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if isinstance(body, bytes):
        lines.append(f"Content-Length: {len(body)}")
    elif body is not None:
        lines.append("Transfer-Encoding: chunked")
    elif method in ("POST", "PUT", "PATCH"):
        lines.append("Content-Length: 0")
    text = "\r\n".join(lines)
    if text.count("\n") != len(lines) - 1 or "\r" in text.replace("\r\n", ""):
        raise ValueError("a request header holds a line break")
    return (text + "\r\n\r\n").encode("utf-8", "surrogateescape")


async def _until(waiter: asyncio.Future[None], deadline: float, read_timeout_s: float | None = None) -> None:
    """Await `waiter`, raising TimeoutError at the deadline or after `read_timeout_s`, whichever is first."""
    loop = waiter.get_loop()
    delay = deadline - loop.time()
    if read_timeout_s is not None and read_timeout_s < delay:
        delay = read_timeout_s
    if delay <= 0:
        raise TimeoutError
    timer = loop.call_later(delay, _expire, waiter)
    try:
        await waiter
    finally:
        timer.cancel()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())
