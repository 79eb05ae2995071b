"""The keep-alive HTTP/1.1 client (`proxy.upstream.http`), against raw servers that write exact bytes."""

from __future__ import annotations

import asyncio
import gc
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
import trustme
from multidict import CIMultiDict

from proxy.upstream.http import Pool, ProtocolError, Response

Handler = Callable[["Conn"], Awaitable[None]]


@dataclass
class Seen:
    """One request as the server read it."""

    connection: int
    line: str
    headers: CIMultiDict[str]
    body: bytes
    head: bytes


class Conn:
    """One accepted connection, with helpers to read requests and write exact bytes."""

    def __init__(self, upstream: Upstream, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.upstream = upstream
        self.index = index
        self.reader = reader
        self.writer = writer
        self.eof = asyncio.Event()
        """The client closed its side."""

    async def request(self) -> Seen | None:
        """The next request, read whole (de-chunked), or None at a clean end of the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if e.partial:
                raise AssertionError(f"the client sent a partial request head: {e.partial!r}") from None
            self.eof.set()
            return None
        line, *rest = head[:-4].decode().split("\r\n")
        headers: CIMultiDict[str] = CIMultiDict()
        for header in rest:
            name, colon, value = header.partition(":")
            assert colon, f"a request header line without a colon: {header!r}"
            headers.add(name, value.strip())
        if "chunked" in headers.get("Transfer-Encoding", ""):
            body = await self.read_chunked()
        else:
            body = await self.reader.readexactly(int(headers.get("Content-Length", "0")))
        seen = Seen(self.index, line, headers, body, head)
        self.upstream.requests.append(seen)
        return seen

    async def read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            size = int((await self.reader.readuntil(b"\r\n"))[:-2], 16)
            if size == 0:
                while await self.reader.readuntil(b"\r\n") != b"\r\n":
                    pass
                return bytes(body)
            body += await self.reader.readexactly(size)
            assert await self.reader.readexactly(2) == b"\r\n"

    async def send(self, *parts: bytes, pause: float = 0.0) -> None:
        """Write each part on its own (with `pause` seconds between them)."""
        for i, part in enumerate(parts):
            if i and pause:
                await asyncio.sleep(pause)
            self.writer.write(part)
            await self.writer.drain()

    async def hold(self) -> None:
        """Keep the connection open until the client closes it (recording, unanswered, any request)."""
        while await self.request() is not None:
            pass


class Upstream:
    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.conns: list[Conn] = []
        self.requests: list[Seen] = []
        self.errors: list[BaseException] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def connections(self) -> int:
        return len(self.conns)

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self.tls)
        self.port = self.server.sockets[0].getsockname()[1]

    def url(self, path: str = "") -> str:
        if self.tls:
            return f"https://localhost:{self.port}{path}"  # the name its certificate holds
        return f"http://127.0.0.1:{self.port}{path}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Conn(self, len(self.conns), reader, writer)
        self.conns.append(conn)
        # The handler runs in a task of its own, which `stop` may cancel (Python 3.11's streams log an
        # error when the task they started for a connection ends cancelled).
        task = asyncio.create_task(self._handle(conn))
        self._tasks.add(task)
        await asyncio.wait([task])

    async def _handle(self, conn: Conn) -> None:
        try:
            await self.handler(conn)
        except (OSError, asyncio.IncompleteReadError):
            conn.eof.set()  # the client went away (mid-request, or with a reset)
        finally:
            conn.writer.close()

    async def stop(self) -> None:
        self.server.close()
        for task in self._tasks:
            task.cancel()
        ends = await asyncio.gather(*self._tasks, return_exceptions=True)
        self.errors += [end for end in ends if isinstance(end, Exception)]  # a handler's failed assertion
        await self.server.wait_closed()


Serve = Callable[..., Awaitable[tuple[Upstream, Pool]]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    made: list[tuple[Upstream, Pool]] = []

    async def start(
        handler: Handler,
        *,
        path: str = "",
        max_connections: int = 4,
        idle_s: float = 15.0,
        tls: ssl.SSLContext | None = None,
    ) -> tuple[Upstream, Pool]:
        upstream = Upstream(handler, tls)
        await upstream.start()
        pool = Pool(upstream.url(path), max_connections=max_connections, connect_timeout_s=1.0, idle_s=idle_s)
        made.append((upstream, pool))
        return upstream, pool

    yield start
    for upstream, pool in made:
        await pool.close()
        await upstream.stop()
    for upstream, _ in made:
        assert not upstream.errors, upstream.errors


def answer(body: bytes = b"ok", status: str = "200 OK", *headers: str, version: str = "HTTP/1.1") -> bytes:
    """An answer framed by Content-Length."""
    lines = [f"{version} {status}", *headers, f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def replies(*answers: bytes) -> Handler:
    """A handler that answers each request with the next of `answers` (over all connections), then holds."""
    left = list(answers)

    async def handle(conn: Conn) -> None:
        while left:
            if await conn.request() is None:
                return
            await conn.send(left.pop(0))
        await conn.hold()

    return handle


async def get(
    pool: Pool,
    target: str = "/x",
    *,
    method: str = "GET",
    headers: tuple[tuple[str, str], ...] = (),
    body: bytes | AsyncIterator[bytes] | None = None,
    timeout_s: float = 2.0,
    read_timeout_s: float | None = 1.0,
) -> Response:
    return await pool.request(method, target, headers, body, timeout_s=timeout_s, read_timeout_s=read_timeout_s)


async def read(pool: Pool, target: str = "/x", **kw: object) -> bytes:
    response = await get(pool, target, **kw)  # type: ignore[arg-type]
    return await response.read()


def elapsed_since(start: float) -> float:
    return asyncio.get_running_loop().time() - start


async def settle() -> None:
    """Let the other side's close (or accept) reach this side."""
    await asyncio.sleep(0.05)


# --- framing of answers ----------------------------------------------------------------------


async def test_content_length_answer_is_read_whole_and_its_connection_reused(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(answer(b"hello", "200 OK", "Content-Type: text/plain", "X-Multi: 1", "X-Multi: 2"))
        await conn.request()
        # the second answer's body arrives in pieces
        await conn.send(b"HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\nwor", b"ld", b"!!!!!!", pause=0.01)
        await conn.hold()

    upstream, pool = await serve(handle)
    first = await get(pool)
    assert first.status == 200
    assert first.content_length == 5
    assert first.headers["content-type"] == "text/plain"
    assert first.headers.getall("X-Multi") == ["1", "2"]
    assert await first.read() == b"hello"
    second = await get(pool, "/y")
    assert (second.status, second.content_length) == (201, 11)
    chunks = [chunk async for chunk in second.iter_chunks()]
    assert b"".join(chunks) == b"world!!!!!!"
    assert upstream.connections == 1
    assert [(s.connection, s.line) for s in upstream.requests] == [(0, "GET /x HTTP/1.1"), (0, "GET /y HTTP/1.1")]
    assert not upstream.conns[0].eof.is_set()


async def test_a_large_body_is_read_whole_through_backpressure(serve: Serve) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB, over the client's high-water mark
    upstream, pool = await serve(replies(answer(big), answer(b"after")))
    response = await get(pool)
    got = bytearray()
    async for chunk in response.iter_chunks():
        got += chunk
        await asyncio.sleep(0)  # a slow reader
    assert got == big
    assert await read(pool) == b"after"
    assert upstream.connections == 1


async def test_chunked_answer_streams_chunk_by_chunk(serve: Serve) -> None:
    gate = asyncio.Event()

    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n")
        await gate.wait()  # the next chunk only once the client has passed the first on
        await conn.send(b'1A ; name="v"\r\n' + b"a" * 26 + b"\r\n", b"3\r\nend\r\n0\r\nX-Trailer: t\r\n\r\n")
        await conn.hold()

    upstream, pool = await serve(handle)
    response = await get(pool)
    assert response.status == 200
    assert response.content_length is None
    chunks = response.iter_chunks()
    assert await asyncio.wait_for(anext(chunks), 1.0) == b"hello"
    gate.set()
    rest = [chunk async for chunk in chunks]
    assert b"".join(rest) == b"a" * 26 + b"end"
    assert upstream.connections == 1


async def test_chunked_answer_read_whole_with_trailers_then_the_connection_is_reused(serve: Serve) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4;ext=1\r\nWiki\r\n"
        b"b;a=b;c\r\npedia in \r\n\r\n"  # a chunk whose bytes hold a CRLF
        b"0;last=yes\r\nX-Checksum: abc\r\nX-Other: d\r\n\r\n"
    )
    upstream, pool = await serve(replies(chunked, answer(b"next")))
    response = await get(pool)
    assert response.content_length is None
    assert await response.read() == b"Wikipedia in \r\n"
    assert await read(pool) == b"next"  # the trailers were consumed: the next answer is read right
    assert upstream.connections == 1
    assert [s.connection for s in upstream.requests] == [0, 0]


async def test_chunked_with_a_content_length_is_read_chunked_and_its_connection_not_reused(serve: Serve) -> None:
    both = b"HTTP/1.1 200 OK\r\nContent-Length: 999\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n0\r\n\r\n"
    upstream, pool = await serve(replies(both, answer(b"next")))
    response = await get(pool)
    assert response.content_length is None  # chunked wins over Content-Length
    assert await response.read() == b"Wiki"
    assert await read(pool) == b"next"
    assert [s.connection for s in upstream.requests] == [0, 1]  # RFC 9112 6.3: both is suspect


async def test_a_transfer_coding_not_ending_in_chunked_is_read_to_the_close(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nraw bytes")
        conn.writer.close()

    _, pool = await serve(handle)
    assert await read(pool) == b"raw bytes"


async def test_answers_split_byte_by_byte_are_framed_right(serve: Serve) -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;e=f\r\nde\r\n0\r\nT: 1\r\n\r\n"

    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(*(chunked[i : i + 1] for i in range(len(chunked))), pause=0.001)
        await conn.request()
        whole = answer(b"xyz")
        await conn.send(*(whole[i : i + 1] for i in range(len(whole))), pause=0.001)
        await conn.hold()

    upstream, pool = await serve(handle)
    assert await read(pool) == b"abcde"
    assert await read(pool) == b"xyz"
    assert upstream.connections == 1


async def test_chunk_longer_than_its_size_is_a_protocol_error(serve: Serve) -> None:
    _, pool = await serve(replies(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n"))
    response = await get(pool)
    with pytest.raises(ProtocolError):
        await response.read()


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
async def test_answer_ending_at_close_is_read_whole_and_its_connection_not_reused(serve: Serve, version: str) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(f"{version} 200 OK\r\nX-A: b\r\n\r\n".encode() + b"part1", b"part2", pause=0.02)
        # and the end of the connection ends the body

    upstream, pool = await serve(handle)
    response = await get(pool)
    assert response.content_length is None
    assert await response.read() == b"part1part2"
    assert await read(pool) == b"part1part2"
    assert upstream.connections == 2
    assert [s.connection for s in upstream.requests] == [0, 1]


@pytest.mark.parametrize(
    "first",
    [
        answer(b"ok", "200 OK", "Connection: close"),
        answer(b"ok", "200 OK", "Connection: Close"),
        answer(b"ok", "200 OK", "Connection: keep-alive, close"),
        answer(b"ok", "200 OK", version="HTTP/1.0"),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    ],
    ids=["close", "Close", "keep-alive-close", "http-1.0", "chunked-close"],
)
async def test_an_answer_that_asks_to_close_is_not_reused(serve: Serve, first: bytes) -> None:
    # The server keeps the connection open: the client alone decides not to reuse it.
    upstream, pool = await serve(replies(first, answer(b"second")))
    assert await read(pool) == b"ok"
    assert await read(pool) == b"second"
    assert upstream.connections == 2
    assert [s.connection for s in upstream.requests] == [0, 1]
    await asyncio.wait_for(upstream.conns[0].eof.wait(), 1.0)  # and the client closed it


async def test_content_length_answer_followed_by_close_is_not_reused(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(answer(b"bye"))

    upstream, pool = await serve(handle)
    assert await read(pool) == b"bye"
    await settle()
    assert await read(pool) == b"bye"
    assert upstream.connections == 2


async def test_interim_answers_are_skipped(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n",
            b"HTTP/1.1 201 Created\r\nX-Final: yes\r\nContent-Length: 3\r\n\r\nabc",
            pause=0.01,
        )
        await conn.request()
        await conn.send(answer(b"again"))
        await conn.hold()

    upstream, pool = await serve(handle)
    response = await get(pool, method="POST", body=b"{}")
    assert response.status == 201
    assert response.headers["X-Final"] == "yes"
    assert "Link" not in response.headers
    assert await response.read() == b"abc"
    assert await read(pool) == b"again"
    assert upstream.connections == 1


@pytest.mark.parametrize(
    ("method", "first", "length"),
    [
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 1000),
        ("HEAD", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", None),
        ("GET", b"HTTP/1.1 204 No Content\r\n\r\n", None),
        ("GET", b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", 0),
        ("GET", b'HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\nETag: "e"\r\n\r\n', 50),
    ],
    ids=["head", "head-chunked", "204", "204-length-0", "304"],
)
async def test_answers_without_a_body_read_none_and_keep_the_connection(
    serve: Serve, method: str, first: bytes, length: int | None
) -> None:
    upstream, pool = await serve(replies(first, answer(b"next")))
    response = await get(pool, method=method, read_timeout_s=0.3)
    assert response.content_length == length
    assert await response.read() == b""
    assert await read(pool) == b"next"  # were any of it read as the first's body, this would not be `next`
    assert upstream.connections == 1
    assert upstream.requests[0].line == f"{method} /x HTTP/1.1"


# --- framing of requests ---------------------------------------------------------------------


async def body_of(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        await asyncio.sleep(0)
        yield part


async def test_request_framing_as_the_server_sees_it(serve: Serve) -> None:
    upstream, pool = await serve(replies(*(answer(b"ok") for _ in range(4))), path="/v1")
    auth = (("Authorization", "Bearer k"), ("X-Dup", "1"), ("X-Dup", "2"))
    assert await read(pool, "/chat/completions?x=1", method="POST", headers=auth, body=b'{"a":1}') == b"ok"
    assert await read(pool, "/stream", method="POST", body=body_of(b"ab", b"", b"cde", b"f" * 3000)) == b"ok"
    assert await read(pool, "/empty", method="POST") == b"ok"
    assert await read(pool, "/models", method="GET") == b"ok"
    assert upstream.connections == 1
    fixed, streamed, empty, plain = upstream.requests

    assert fixed.line == "POST /v1/chat/completions?x=1 HTTP/1.1"
    assert fixed.headers.getall("Host") == [f"127.0.0.1:{upstream.port}"]
    assert fixed.headers["Content-Length"] == "7"
    assert "Transfer-Encoding" not in fixed.headers
    assert fixed.headers["Authorization"] == "Bearer k"
    assert fixed.headers.getall("X-Dup") == ["1", "2"]
    assert fixed.body == b'{"a":1}'

    assert streamed.line == "POST /v1/stream HTTP/1.1"
    assert streamed.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in streamed.headers
    assert streamed.body == b"abcde" + b"f" * 3000  # an empty part did not end the body early

    assert empty.line == "POST /v1/empty HTTP/1.1"
    assert empty.headers["Content-Length"] == "0"
    assert empty.body == b""

    assert plain.line == "GET /v1/models HTTP/1.1"
    assert "Content-Length" not in plain.headers
    assert "Transfer-Encoding" not in plain.headers


async def test_a_base_url_with_a_trailing_slash_or_none_prefixes_targets_once(serve: Serve) -> None:
    upstream, pool = await serve(replies(answer(), answer()), path="/api/v1/")
    assert await read(pool, "/a?b=c") == b"ok"
    upstream2, pool2 = await serve(replies(answer()))
    assert await read(pool2, "/a") == b"ok"
    assert upstream.requests[0].line == "GET /api/v1/a?b=c HTTP/1.1"
    assert upstream2.requests[0].line == "GET /a HTTP/1.1"


async def test_an_async_body_is_sent_as_it_is_produced(serve: Serve) -> None:
    got_first = asyncio.Event()

    async def handle(conn: Conn) -> None:
        await conn.reader.readuntil(b"\r\n\r\n")
        assert await conn.reader.readuntil(b"\r\n") == b"5\r\n"
        assert await conn.reader.readexactly(7) == b"first\r\n"
        got_first.set()
        assert await conn.read_chunked() == b"second"
        await conn.send(answer(b"done"))
        await conn.hold()

    async def produce() -> AsyncIterator[bytes]:
        yield b"first"
        await asyncio.wait_for(got_first.wait(), 1.0)  # the server has the first part before the second is made
        yield b"second"

    _, pool = await serve(handle)
    assert await read(pool, method="PUT", body=produce()) == b"done"
    assert got_first.is_set()


async def test_a_failing_async_body_drops_the_connection_and_frees_the_place(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        if conn.index == 0:
            await conn.hold()  # the first request's upload never ends
            return
        await conn.request()
        await conn.send(answer(b"fine"))
        await conn.hold()

    async def broken() -> AsyncIterator[bytes]:
        yield b"some"
        raise RuntimeError("the body's source failed")

    upstream, pool = await serve(handle, max_connections=1)
    with pytest.raises(ConnectionError, match="source failed"):  # a 502, not a 500
        await get(pool, method="POST", body=broken())
    await asyncio.wait_for(upstream.conns[0].eof.wait(), 1.0)
    assert await read(pool) == b"fine"
    assert upstream.connections == 2


async def test_an_answer_sent_before_the_upload_ends_is_read(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.reader.readuntil(b"\r\n\r\n")
        await conn.send(answer(b"too large", "413 Payload Too Large", "Connection: close"))
        # and the end of the connection, without reading the body

    async def slow() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"x" * 100
            await asyncio.sleep(0.02)

    _, pool = await serve(handle)
    response = await get(pool, method="POST", body=slow())
    assert response.status == 413
    assert await response.read() == b"too large"


@pytest.mark.parametrize(
    "headers",
    [
        (("X-A", "a\r\nX-Injected: 1"),),
        (("X-A", "a\nb"),),
        (("X-A", "a\rb"),),
        (("X-A\r\nX-B", "v"),),
    ],
    ids=["crlf", "lf", "cr", "in-name"],
)
async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent(
    serve: Serve, headers: tuple[tuple[str, str], ...]
) -> None:
    upstream, pool = await serve(replies(answer(b"fine")), max_connections=1)
    with pytest.raises(ValueError, match="line break"):
        await get(pool, method="POST", headers=headers, body=b"x")
    await settle()
    assert upstream.connections == 0
    assert await read(pool) == b"fine"  # and no place in the pool was lost
    assert len(upstream.requests) == 1


# --- stale keep-alive connections ------------------------------------------------------------


async def test_a_connection_the_server_closed_while_idle_is_not_used(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(answer(b"from %d" % conn.index))
        # then the server's idle timeout: close

    upstream, pool = await serve(handle)
    assert await read(pool) == b"from 0"
    await settle()
    assert await read(pool, method="POST", body=b"p") == b"from 1"
    assert upstream.connections == 2
    assert [s.connection for s in upstream.requests] == [0, 1]


async def test_a_reused_connection_closed_without_an_answer_is_retried_once_on_a_new_one(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        if conn.index == 0:
            await conn.request()
            await conn.send(answer(b"first"))
            await conn.request()  # taken whole, then the connection closes unanswered
            return
        await conn.request()
        await conn.send(answer(b"second"))
        await conn.hold()

    upstream, pool = await serve(handle)
    assert await read(pool) == b"first"
    assert await read(pool, "/p", method="GET") == b"second"
    assert upstream.connections == 2
    assert [(s.connection, s.line) for s in upstream.requests] == [
        (0, "GET /x HTTP/1.1"),
        (0, "GET /p HTTP/1.1"),
        (1, "GET /p HTTP/1.1"),
    ]


@pytest.mark.parametrize(("headers", "sent"), [((), 1), ((("Idempotency-Key", "k-1"),), 2)], ids=["plain", "keyed"])
async def test_a_post_is_sent_twice_only_with_an_idempotency_key(
    serve: Serve, headers: tuple[tuple[str, str], ...], sent: int
) -> None:
    """The upstream may have acted on a POST it closed unanswered (billed a completion): it is not sent again."""

    async def handle(conn: Conn) -> None:
        if conn.index == 0:
            await conn.request()
            await conn.send(answer(b"first"))
            await conn.request()
            return
        await conn.request()
        await conn.send(answer(b"second"))
        await conn.hold()

    upstream, pool = await serve(handle)
    assert await read(pool) == b"first"
    if sent == 1:
        with pytest.raises(ConnectionError):
            await read(pool, "/p", method="POST", body=b"payload", headers=headers)
    else:
        assert await read(pool, "/p", method="POST", body=b"payload", headers=headers) == b"second"
    await settle()
    assert [s.body for s in upstream.requests if s.line.startswith("POST")] == [b"payload"] * sent


async def test_a_reused_connection_closed_without_an_answer_is_not_retried_with_an_async_body(
    serve: Serve,
) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(answer(b"first"))
        await conn.request()

    upstream, pool = await serve(handle)
    assert await read(pool) == b"first"
    with pytest.raises(ConnectionError) as caught:
        await get(pool, method="POST", body=body_of(b"once"))
    assert not isinstance(caught.value, ProtocolError)
    await settle()
    assert upstream.connections == 1
    assert [s.body for s in upstream.requests] == [b"", b"once"]


async def test_a_fresh_connection_closed_without_an_answer_is_not_retried(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()

    upstream, pool = await serve(handle)
    with pytest.raises(ConnectionError):
        await get(pool, method="POST", body=b"not twice")
    await settle()
    assert upstream.connections == 1
    assert len(upstream.requests) == 1


async def test_a_reused_connection_closed_mid_answer_is_not_retried(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(answer(b"first"))
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Le")  # some of an answer, then the end

    upstream, pool = await serve(handle)
    assert await read(pool) == b"first"
    with pytest.raises(ConnectionError):
        await get(pool, method="POST", body=b"b")
    await settle()
    assert upstream.connections == 1


async def test_an_idle_connection_past_idle_s_is_closed_not_reused(serve: Serve) -> None:
    upstream, pool = await serve(replies(answer(b"a"), answer(b"b")), idle_s=0.05)
    assert await read(pool) == b"a"
    await asyncio.sleep(0.1)
    assert await read(pool) == b"b"
    assert upstream.connections == 2
    await asyncio.wait_for(upstream.conns[0].eof.wait(), 1.0)


async def test_the_last_connection_returned_is_the_first_reused(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.send(answer(b"conn %d" % conn.index))

    upstream, pool = await serve(handle, max_connections=2)
    a, b = await asyncio.gather(get(pool), get(pool))
    assert upstream.connections == 2
    body_a = await a.read()
    body_b = await b.read()  # b's connection goes back last
    assert await read(pool) == body_b
    assert body_a != body_b
    assert upstream.connections == 2


async def test_close_closes_idle_connections_and_refuses_new_requests(serve: Serve) -> None:
    upstream, pool = await serve(replies(answer(b"a")))
    assert await read(pool) == b"a"
    await pool.close()
    await asyncio.wait_for(upstream.conns[0].eof.wait(), 1.0)
    with pytest.raises(ConnectionError):
        await get(pool)
    assert upstream.connections == 1


# --- timeouts and truncation -----------------------------------------------------------------


async def test_a_silent_upstream_times_out_after_read_timeout_s(serve: Serve) -> None:
    upstream, pool = await serve(lambda conn: conn.hold(), max_connections=1)
    start = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError):
        await get(pool, timeout_s=5.0, read_timeout_s=0.1)
    assert 0.08 <= elapsed_since(start) < 0.5
    assert len(upstream.requests) == 1
    await asyncio.wait_for(upstream.conns[0].eof.wait(), 1.0)  # the connection is dropped ...
    with pytest.raises(TimeoutError):
        await get(pool, timeout_s=0.15, read_timeout_s=None)  # ... and the place freed; the deadline covers the head
    assert upstream.connections == 2


async def test_read_timeout_s_is_for_silence_not_for_the_whole_body(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", *(b"%d" % i for i in range(5)), pause=0.04)
        await conn.hold()

    _, pool = await serve(handle)
    assert await read(pool, read_timeout_s=0.15) == b"01234"


async def test_the_deadline_covers_a_slowly_dripped_body(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        if conn.index == 0:
            await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", *(b"x" for _ in range(100)), pause=0.02)
        else:
            await conn.send(answer(b"fresh"))
        await conn.hold()

    upstream, pool = await serve(handle, max_connections=1)
    start = asyncio.get_running_loop().time()
    response = await get(pool, timeout_s=0.25, read_timeout_s=1.0)
    got = bytearray()
    with pytest.raises(TimeoutError):
        async for chunk in response.iter_chunks():
            got += chunk
    assert 0.2 <= elapsed_since(start) < 0.6
    assert 0 < len(got) < 100
    assert await read(pool) == b"fresh"  # the timed-out connection was dropped, its place freed
    assert upstream.connections == 2


@pytest.mark.parametrize(
    "truncated",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n",
    ],
    ids=["length-partial", "length-none", "chunk-partial", "no-last-chunk"],
)
async def test_a_body_cut_short_by_close_is_a_connection_error(serve: Serve, truncated: bytes) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(truncated)

    _, pool = await serve(handle)
    response = await get(pool)
    with pytest.raises(ConnectionError) as caught:
        await response.read()
    assert isinstance(caught.value, OSError)


async def test_connection_refused_is_an_os_error_and_frees_the_place() -> None:
    with socket.socket() as bound:  # bound, never listening: nothing accepts, nothing else takes the port
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        pool = Pool(f"http://127.0.0.1:{port}", max_connections=1, connect_timeout_s=1.0)
        try:
            for _ in range(2):
                with pytest.raises(ConnectionRefusedError):
                    await get(pool, timeout_s=1.0)
        finally:
            await pool.close()


async def test_a_connect_that_never_completes_times_out_after_connect_timeout_s() -> None:
    # A listener that never accepts, its backlog full: the kernel drops further SYNs, so connecting hangs.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        await asyncio.sleep(0.05)
        pool = Pool(f"http://127.0.0.1:{port}", max_connections=1, connect_timeout_s=0.1)
        try:
            for _ in range(2):  # and the place is freed each time
                start = asyncio.get_running_loop().time()
                with pytest.raises(TimeoutError):
                    await get(pool, timeout_s=2.0)
                assert 0.08 <= elapsed_since(start) < 0.5
        finally:
            await pool.close()
            for filler in fillers:
                filler.close()


# --- malformed answers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        b"garbage\r\n\r\n",
        b"HTTP/2 200\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 abc OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nX-A: b\r\n folded\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\n: no-name\r\nContent-Length: 2\r\n\r\nok",
    ],
    ids=[
        "garbage-status",
        "http-2",
        "non-numeric-status",
        "bad-chunk-size",
        "empty-chunk-size",
        "negative-chunk-size",
        "conflicting-lengths",
        "non-numeric-length",
        "negative-length",
        "no-colon",
        "obs-fold",
        "space-before-colon",
        "empty-name",
    ],
)
async def test_malformed_answers_are_protocol_errors_and_the_pool_recovers(serve: Serve, bad: bytes) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(bad if conn.index == 0 else answer(b"good"))
        await conn.hold()

    upstream, pool = await serve(handle, max_connections=1)
    with pytest.raises(ProtocolError):
        await read(pool)
    assert issubclass(ProtocolError, ConnectionError)
    assert await read(pool) == b"good"  # on a new connection, the place of the first freed
    assert upstream.connections == 2


async def test_an_answer_head_over_64_kb_is_a_protocol_error(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * (70 * 1024))
        await conn.hold()  # the head never ends: only the limit can stop the read

    _, pool = await serve(handle)
    with pytest.raises(ProtocolError):
        await get(pool, read_timeout_s=1.0)


async def test_an_answer_head_just_under_64_kb_is_read(serve: Serve) -> None:
    head = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (60 * 1024) + b"\r\nContent-Length: 2\r\n\r\n"
    _, pool = await serve(replies(head + b"ok"))
    response = await get(pool)
    assert len(response.headers["X-Pad"]) == 60 * 1024
    assert await response.read() == b"ok"


# --- the pool's limit ------------------------------------------------------------------------


async def test_with_one_connection_a_second_request_waits_for_the_first_body(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        while (seen := await conn.request()) is not None:
            await conn.send(answer(seen.line.split()[1].encode()))

    upstream, pool = await serve(handle, max_connections=1)
    first = await get(pool, "/1")
    second = asyncio.create_task(get(pool, "/2"))
    await settle()
    assert not second.done()
    assert len(upstream.requests) == 1  # the second has not been sent
    assert await first.read() == b"/1"
    response = await asyncio.wait_for(second, 1.0)
    assert await response.read() == b"/2"
    assert upstream.connections == 1
    assert [s.line for s in upstream.requests] == ["GET /1 HTTP/1.1", "GET /2 HTTP/1.1"]


async def test_a_waiter_past_its_deadline_times_out_and_a_cancelled_one_leaves_the_line(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        while (seen := await conn.request()) is not None:
            await conn.send(answer(seen.line.split()[1].encode()))

    upstream, pool = await serve(handle, max_connections=1)
    first = await get(pool, "/1")
    start = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError):
        await get(pool, "/late", timeout_s=0.15)
    assert 0.12 <= elapsed_since(start) < 0.5
    cancelled = asyncio.create_task(get(pool, "/cancelled"))
    waiting = asyncio.create_task(get(pool, "/3"))
    await asyncio.sleep(0.02)
    cancelled.cancel()
    assert await first.read() == b"/1"
    response = await asyncio.wait_for(waiting, 1.0)
    assert await response.read() == b"/3"
    assert cancelled.cancelled()
    assert await read(pool, "/4") == b"/4"
    assert [s.line.split()[1] for s in upstream.requests] == ["/1", "/3", "/4"]
    assert upstream.connections == 1


async def test_a_response_closed_early_drops_its_connection_and_frees_the_place(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.send(answer(b"%d" % conn.index * 1000))

    upstream, pool = await serve(handle, max_connections=1)
    response = await get(pool)
    assert response.status == 200
    response.close()  # the body unread
    response.close()  # twice is harmless (no second release)
    await asyncio.wait_for(upstream.conns[0].eof.wait(), 1.0)
    assert await read(pool) == b"1" * 1000
    assert await read(pool) == b"1" * 1000
    assert upstream.connections == 2
    blocker = await get(pool)  # exactly one place: a third concurrent request must wait
    with pytest.raises(TimeoutError):
        await get(pool, timeout_s=0.1)
    blocker.close()


async def test_a_request_cancelled_while_awaiting_its_answer_frees_the_place(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        if conn.index == 0:
            await conn.hold()
            return
        await conn.request()
        await conn.send(answer(b"later"))
        await conn.hold()

    upstream, pool = await serve(handle, max_connections=1)
    pending = asyncio.create_task(get(pool))
    await settle()
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    await asyncio.wait_for(upstream.conns[0].eof.wait(), 1.0)
    assert await read(pool) == b"later"
    assert upstream.connections == 2


# --- found in a first version of the module ------------------------------------------------


async def test_bytes_past_an_answers_end_are_not_taken_for_the_next_answer(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        if conn.index == 0:
            await conn.request()
            await conn.send(answer(b"one") + answer(b"unasked"))  # a second answer, to no request
        while await conn.request() is not None:
            await conn.send(answer(b"two"))

    upstream, pool = await serve(handle)
    assert await read(pool) == b"one"
    assert await read(pool) == b"two"
    assert await read(pool) == b"two"
    assert upstream.connections == 2


async def test_bytes_that_come_on_an_idle_connection_end_it(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        if conn.index == 0:
            await conn.send(answer(b"one"))
            await asyncio.sleep(0.02)
            await conn.send(answer(b"unasked"))  # while the connection is idle, and it stays open
        else:
            await conn.send(answer(b"two"))
        await conn.hold()

    upstream, pool = await serve(handle)
    assert await read(pool) == b"one"
    await settle()
    assert await read(pool) == b"two"
    assert upstream.connections == 2


async def test_a_head_over_64_kb_is_refused_even_when_its_end_arrives_with_it(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(
            b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (60 * 1024),  # under the limit, no end yet
            b"a" * (10 * 1024) + b"\r\nContent-Length: 2\r\n\r\nok",  # over it, with the end
            pause=0.05,
        )
        await conn.hold()

    _, pool = await serve(handle)
    with pytest.raises(ProtocolError):
        await read(pool)


@pytest.mark.parametrize(
    "bad",
    [
        "HTTP/1.1 200 OK\r\nContent-Length: ²\r\n\r\nok".encode(),
        "HTTP/1.1 ²00 OK\r\nContent-Length: 2\r\n\r\nok".encode(),
        "HTTP/1.1 200 OK\r\nContent-Length: ١٢\r\n\r\nok".encode(),
    ],
    ids=["superscript-length", "superscript-status", "arabic-indic-length"],
)
async def test_non_ascii_digits_are_a_protocol_error(serve: Serve, bad: bytes) -> None:
    _, pool = await serve(replies(bad))
    with pytest.raises(ProtocolError):
        await read(pool)


@pytest.mark.parametrize("size", [b"0x5", b"+5", b"0_5", b"5 5"])
async def test_a_chunk_size_that_is_not_plain_hex_is_a_protocol_error(serve: Serve, size: bytes) -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\nhello\r\n0\r\n\r\n"
    _, pool = await serve(replies(chunked))
    with pytest.raises(ProtocolError):
        await read(pool)


async def test_the_deadline_covers_an_upload_the_upstream_stops_reading(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(10)  # reads no more: the socket buffers fill, then the client's transport

    piece = b"x" * (256 * 1024)

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield piece

    _, pool = await serve(handle)
    task = asyncio.create_task(get(pool, method="POST", body=endless(), timeout_s=0.3, read_timeout_s=0.3))
    done, _ = await asyncio.wait([task], timeout=1.0)
    if not done:
        task.cancel()
    assert task in done
    assert isinstance(task.exception(), TimeoutError)


@pytest.mark.parametrize("line", [b"HTTP/1.1 20", b"HTTP/1.1 2000 OK", b"HTTP/1.1 200OK"])
async def test_a_status_code_not_of_three_digits_is_a_protocol_error(serve: Serve, line: bytes) -> None:
    _, pool = await serve(replies(line + b"\r\nContent-Length: 2\r\n\r\nok"))
    with pytest.raises(ProtocolError):
        await read(pool)


async def test_an_answer_ending_at_close_cut_by_a_reset_is_a_connection_error(serve: Serve) -> None:
    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\n\r\npartial")
        await asyncio.sleep(0.05)
        sock = conn.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a RST
        conn.writer.transport.abort()

    _, pool = await serve(handle)
    response = await get(pool)
    with pytest.raises(ConnectionError):  # (the reset, or a ConnectionError from it)
        await response.read()


async def test_a_connection_pooled_after_a_large_answer_still_sees_the_upstream_close_it(serve: Serve) -> None:
    """A large answer read slowly (reading pauses and resumes), then the upstream closes the idle connection."""
    tail = b"x" * (300 * 1024)

    async def first(conn: Conn) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nhead" % (4 + len(tail)))
        await asyncio.sleep(0.05)
        await conn.send(tail)  # comes while the reader is busy: reading pauses over 256 KB
        await asyncio.sleep(0.2)
        conn.writer.close()  # the upstream's idle timeout

    async def second(conn: Conn) -> None:
        await conn.request()
        await conn.send(answer(b"fresh"))
        await conn.hold()

    upstream, pool = await serve(lambda conn: first(conn) if conn.index == 0 else second(conn))
    response = await get(pool)
    pieces = []
    async for piece in response.iter_chunks():
        pieces.append(piece)
        await asyncio.sleep(0.1)  # a slow client downstream
    assert b"".join(pieces) == b"head" + tail
    await asyncio.sleep(0.3)
    assert await read(pool, "/p", method="POST", body=b"once") == b"fresh"  # a POST is never retried
    assert upstream.connections == 2


async def test_an_early_answer_stops_an_upload_the_upstream_no_longer_reads(serve: Serve) -> None:
    closed = asyncio.Event()

    async def handle(conn: Conn) -> None:
        await conn.reader.readuntil(b"\r\n\r\n")
        await conn.send(answer(b"too large", "413 Payload Too Large"))
        await asyncio.sleep(1.5)  # reads no more for a while, the connection kept open
        while await conn.reader.read(65536):
            pass
        closed.set()

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"y" * 65536

    _, pool = await serve(handle)
    started = asyncio.get_running_loop().time()
    response = await get(pool, method="POST", body=endless(), timeout_s=5.0, read_timeout_s=5.0)
    assert (response.status, await response.read()) == (413, b"too large")
    assert elapsed_since(started) < 1.0  # not when the upstream reads again
    await asyncio.wait_for(closed.wait(), 3.0)  # spent: closed, not pooled


async def test_an_answer_dropped_without_close_gives_its_place_back(serve: Serve) -> None:
    upstream, pool = await serve(replies(answer(b"unread"), answer(b"next")), max_connections=1)
    response = await get(pool)
    del response
    gc.collect()
    assert await read(pool, timeout_s=1.0) == b"next"
    assert upstream.connections == 2  # the dropped one was closed


async def test_closing_the_pool_wakes_its_waiters(serve: Serve) -> None:
    _, pool = await serve(replies(answer(b"held")), max_connections=1)
    held = await get(pool)
    waiter = asyncio.create_task(get(pool, timeout_s=5.0))
    await settle()
    await pool.close()
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(waiter, 1.0)
    held.close()


async def test_a_new_connection_tries_the_next_address_while_one_hangs(serve: Serve) -> None:
    """Happy eyeballs: an address that does not answer holds the next one back for 250 ms, not the timeout."""
    upstream, pool = await serve(replies(answer(b"via the second")))
    started = asyncio.get_running_loop().time()
    connection = await pool._first_to_connect(["192.0.2.1", "127.0.0.1"])  # TEST-NET-1: never answers
    assert elapsed_since(started) < 1.0
    connection.close()
    assert upstream.connections == 1


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, ssl.SSLContext, str]:
    """A certificate authority, a server context with its certificate for localhost, and the CA's PEM file."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server)
    pem = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    return ca, server, str(pem)


async def test_https_answers_are_read_whole_and_streamed_over_one_connection(
    serve: Serve, authority: tuple[trustme.CA, ssl.SSLContext, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default context verifies the upstream's certificate against SSL_CERT_FILE (a team's own CA)."""
    _, server, pem = authority
    monkeypatch.setenv("SSL_CERT_FILE", pem)
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    upstream, pool = await serve(replies(answer(b"secure"), chunked), tls=server)
    assert await read(pool) == b"secure"
    response = await get(pool)
    assert [chunk async for chunk in response.iter_chunks()] == [b"hello", b" world"]
    assert upstream.connections == 1
    assert upstream.requests[0].headers["Host"] == f"localhost:{upstream.port}"


async def test_https_answer_ending_at_close_is_read_whole(
    serve: Serve, authority: tuple[trustme.CA, ssl.SSLContext, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server, pem = authority
    monkeypatch.setenv("SSL_CERT_FILE", pem)

    async def handle(conn: Conn) -> None:
        await conn.request()
        await conn.send(b"HTTP/1.1 200 OK\r\n\r\nuntil the end")
        conn.writer.close()
        await conn.writer.wait_closed()

    _, pool = await serve(handle, tls=server)
    assert await read(pool) == b"until the end"


async def test_https_with_an_unknown_certificate_is_refused(
    serve: Serve, authority: tuple[trustme.CA, ssl.SSLContext, str]
) -> None:
    _, server, _ = authority
    upstream, pool = await serve(replies(answer(b"never")), tls=server)
    with pytest.raises(ssl.SSLCertVerificationError):
        await read(pool)
    assert upstream.requests == []


async def test_a_place_given_up_goes_to_the_longest_waiter(serve: Serve) -> None:
    _, pool = await serve(replies(answer(b"a"), answer(b"b"), answer(b"c")), max_connections=1)
    first = await get(pool, "/a")
    served: list[str] = []

    async def later(target: str) -> None:
        response = await get(pool, target)
        served.append(target)
        await response.read()

    waiting = asyncio.create_task(later("/b"))
    await settle()
    first.close()  # the place goes to /b, which has not run again yet
    await later("/c")  # asks at once, before /b resumes: it waits for /b's turn to end
    await waiting
    assert served == ["/b", "/c"]


async def test_a_waiter_that_timed_out_does_not_hold_back_a_free_place(serve: Serve) -> None:
    _, pool = await serve(replies(answer(b"held"), answer(b"free")), max_connections=1)
    held = await get(pool)
    with pytest.raises(TimeoutError):
        await get(pool, timeout_s=0.1)
    held.close()
    assert await read(pool, timeout_s=1.0) == b"free"
