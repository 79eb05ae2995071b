"""One pipelined connection for the journal's scripts on a single server: the hot path's calls.

redis-py's client costs about 55 us of CPU a call here: a pool checkout, its retry and
observability layers, and its 5 s socket timeout through `asyncio.wait_for`, which makes a
task per write on Python 3.11. A turn makes two calls. The line packs a command with hiredis,
writes it to its one connection and resolves each reply's future as it arrives, in order
(a server answers a connection's commands in the order they were sent): about 35 us a call,
its timeout included, and concurrent turns share the connection's reads.

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
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError

_TIMEOUT_S = 5.0
"""As redis-py's default socket timeout: a server that stops answering fails a call, not hangs it."""


class _Replies(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: deque[asyncio.Future[Any]] = deque()
        self._reader = hiredis.Reader(replyError=BaseParser.parse_error)  # redis-py's own errors, as its parser

    @property
    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while (reply := self._reader.gets()) is not False:
            future = self.waiting.popleft()
            if future.cancelled():
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(ConnectionError(f"connection to the store lost: {exc or 'closed'}"))

    def send(self, command: tuple[Any, ...]) -> asyncio.Future[Any]:
        assert self.transport is not None
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.transport.write(hiredis.pack_command(command))
        return future


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
        replies = None
        try:
            async with asyncio.timeout(self._timeout_s):
                replies = self._replies if self._replies is not None and self._replies.open else await self._connect()
                return await replies.send(command)
        except TimeoutError:
            if replies is not None:  # the connection this call waited on, whatever the line holds now
                self._drop(replies)
            raise

    async def _connect(self) -> _Replies:
        async with self._connecting:
            if self._replies is not None and self._replies.open:
                return self._replies
            loop = asyncio.get_running_loop()
            o = self._options
            if "path" in o:
                _, replies = await loop.create_unix_connection(_Replies, o["path"])
            else:
                _, replies = await loop.create_connection(_Replies, o.get("host", "localhost"), o.get("port", 6379))
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
