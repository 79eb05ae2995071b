"""One pipelined connection for the journal's scripts on a single server: the hot path's calls.

redis-py's client costs about 55 us of CPU a call here: a pool checkout, its retry and
observability layers, and its 5 s socket timeout through `asyncio.wait_for`, which makes a
task per write on Python 3.11. A turn makes two calls. The line packs a command with hiredis,
writes it to its one connection and resolves each reply's future as it arrives, in order
(a server answers a connection's commands in the order they were sent): about 35 us a call,
and concurrent turns share the connection's reads. The timeout is one timer per connection,
on its oldest call, not one per call.

Only what may wait behind other commands goes on it: scripts, never `WAIT` (which holds its
connection), so a store with `redis.wait_replicas` or on a cluster keeps redis-py for all.
Replies that are errors become redis-py's exceptions (its own parser's mapping), so the
store maps them as it does redis-py's. A lost connection fails the calls in flight with
`ConnectionError` (a 503, as any outage) and the next call opens a new one; a call with no
reply within the timeout aborts the connection it waited on, failing the others in flight on
it at once, so no later reply is taken for another call's. The URL's host or socket path,
credentials and database are used; its other options (timeouts, client name, protocol) are
not, and TLS URLs stay with redis-py.
"""

from __future__ import annotations

import asyncio
from collections import deque
from functools import partial
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError

_TIMEOUT_S = 5.0
"""As redis-py's default socket timeout: a server that stops answering fails a call, not hangs it."""


class _Replies(asyncio.Protocol):
    """One connection's calls in flight, in the order sent, each with its deadline.

    One timer watches the oldest call (the next reply is its): when it fires past that call's
    deadline the call fails with `TimeoutError` and the connection is aborted, else it is set
    again for the call now oldest. A call costs no timer of its own."""

    def __init__(self, timeout_s: float) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: deque[tuple[asyncio.Future[Any], float]] = deque()
        self._reader = hiredis.Reader(replyError=BaseParser.parse_error)  # redis-py's own errors, as its parser
        self._timeout_s = timeout_s
        self._watch: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._unsent: list[bytes] = []

    @property
    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while (reply := self._reader.gets()) is not False:
            future = self.waiting.popleft()[0]
            if future.cancelled():
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        while self.waiting:
            future = self.waiting.popleft()[0]
            if not future.done():
                future.set_exception(ConnectionError(f"connection to the store lost: {exc or 'closed'}"))

    def send(self, command: tuple[Any, ...]) -> asyncio.Future[Any]:
        """Queue `command`; the commands of one turn of the event loop go out in one write."""
        loop = self._loop
        future = loop.create_future()
        if not self.open:  # lost since the caller looked: no reply will come
            future.set_exception(ConnectionError("connection to the store lost"))
            return future
        deadline = loop.time() + self._timeout_s
        self.waiting.append((future, deadline))
        self._unsent.append(hiredis.pack_command(command))
        if len(self._unsent) == 1:
            loop.call_soon(self._write)
        if self._watch is None:
            self._watch = loop.call_at(deadline, self._check)
        return future

    def _write(self) -> None:
        unsent, self._unsent = self._unsent, []
        if self.open:  # else `connection_lost` fails their calls
            assert self.transport is not None
            self.transport.write(b"".join(unsent))

    def _check(self) -> None:
        self._watch = None
        if not self.waiting:
            return
        future, deadline = self.waiting[0]
        if self._loop.time() < deadline:
            self._watch = self._loop.call_at(deadline, self._check)
            return
        self.waiting.popleft()
        if not future.done():
            future.set_exception(TimeoutError(f"the store did not answer within {self._timeout_s:g} s"))
        if self.transport is not None:  # the others in flight fail with it (`connection_lost`)
            self.transport.abort()


class Line:
    def __init__(self, options: dict[str, Any], *, timeout_s: float = _TIMEOUT_S) -> None:
        self._options = options
        self._timeout_s = timeout_s
        self._replies: _Replies | None = None
        self._connecting = asyncio.Lock()

    @classmethod
    def for_url(cls, url: str) -> Line | None:
        """A line to the server of `url`; None for TLS, which redis-py keeps serving."""
        options = parse_url(url)
        return None if options.get("connection_class") is SSLConnection else cls(dict(options))

    async def call(self, *command: Any) -> Any:
        replies = self._replies
        if replies is None or not replies.open:
            async with asyncio.timeout(self._timeout_s):
                replies = await self._connect()
        return await replies.send(command)

    async def _connect(self) -> _Replies:
        async with self._connecting:
            if self._replies is not None and self._replies.open:
                return self._replies
            loop = asyncio.get_running_loop()
            o = self._options
            factory = partial(_Replies, self._timeout_s)
            if "path" in o:
                _, replies = await loop.create_unix_connection(factory, o["path"])
            else:
                _, replies = await loop.create_connection(factory, o.get("host", "localhost"), o.get("port", 6379))
            handshake = []
            if o.get("password"):
                handshake.append(("AUTH", *([o["username"]] if o.get("username") else []), o["password"]))
            if o.get("db"):
                handshake.append(("SELECT", o["db"]))
            try:
                for command in handshake:
                    await replies.send(command)
            except BaseException:
                self._drop(replies)
                raise
            self._replies = replies
            return replies

    def close(self) -> None:
        if self._replies is not None:
            self._drop(self._replies)

    def _drop(self, replies: _Replies) -> None:
        """Abort the connection (its calls in flight fail at once, unsent writes are dropped)."""
        if replies.transport is not None:
            replies.transport.abort()
        if self._replies is replies:
            self._replies = None
