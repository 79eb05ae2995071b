"""The only code that speaks HTTP to the upstream.

One long-lived pool of keep-alive connections (`http.Pool`) serves every request.
Nothing above this module sees a transport error: connection failures become
`UpstreamUnavailable` (502) and timeouts `UpstreamTimeout` (504), mapped here. An
upstream *answer*, error statuses included, is returned as it is, for the handler
to relay unchanged.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Mapping
from types import TracebackType

from multidict import CIMultiDict, CIMultiDictProxy

from proxy import tracing
from proxy.errors import UpstreamTimeout, UpstreamUnavailable
from proxy.upstream.http import Body, Pool, Response

HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE", "Trailer",
        "Trailers", "Transfer-Encoding", "Upgrade", "Host", "Content-Length",
    )
)  # fmt: skip
_PROXY_HEADERS = frozenset({"x-context-strategy"})
ANTHROPIC_VERSION = "2023-06-01"


@functools.cache
def _not_forwarded(session_header: str) -> frozenset[str]:
    """The client headers that never go upstream, by lower-case name (one session header a process)."""
    return HOP_BY_HOP | _PROXY_HEADERS | {session_header.lower(), "authorization", "x-api-key"}


def _without(headers: Mapping[str, str], names: frozenset[str]) -> CIMultiDict[str]:
    """A copy of `headers` (in their order, repeats kept) less `names` (lower-case): the names
    dropped one by one, not every header's name lowered and compared (a quarter of the time or
    less for the score of headers an SDK sends or an API answers with)."""
    kept = CIMultiDict(headers)
    for name in names:
        kept.popall(name, None)
    return kept


class _Mapped:
    """Timeouts and network errors of one exchange with `url` as the proxy's own (a class, not
    a generator: every upstream call passes through it twice)."""

    __slots__ = ("_url",)

    def __init__(self, url: str) -> None:
        self._url = url

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(exc, TimeoutError):
            raise UpstreamTimeout(f"upstream did not answer in time: {self._url}") from exc
        if isinstance(exc, OSError):
            raise UpstreamUnavailable(f"upstream unreachable: {exc.__class__.__name__}: {exc}") from exc


class UpstreamResponse:
    """An upstream answer whose body is read (or streamed) through mapped errors."""

    def __init__(self, response: Response, url: str) -> None:
        self._response = response
        self._url = url
        self.status = response.status
        self.headers = response.headers
        self.seconds = 0.0
        """From sending the request to the answer's headers."""

    def relay_headers(self) -> CIMultiDict[str]:
        return _without(self.headers, HOP_BY_HOP)

    @property
    def content_length(self) -> int | None:
        return self._response.content_length

    async def read(self) -> bytes:
        with _Mapped(self._url):
            return await self._response.read()

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, in the sizes the network delivers."""
        with _Mapped(self._url):
            async for chunk in self._response.iter_chunks():
                yield chunk

    def close(self) -> None:
        """Drop the connection (used when the client went away mid-stream)."""
        self._response.close()


class UpstreamClient:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout_s: float,
        connect_timeout_s: float,
        max_connections: int,
        read_timeout_s: float | None = None,
        api: str = "openai",
    ) -> None:
        """`timeout_s` bounds a whole exchange; `read_timeout_s` any silence in it (a stalled stream)."""
        self._pool = Pool(base_url, max_connections=max_connections, connect_timeout_s=connect_timeout_s)
        self._base = base_url.rstrip("/")
        self._timeout_s = timeout_s
        self._read_timeout_s = read_timeout_s
        self._api_key = api_key
        self.api = api
        """The wire API this upstream speaks (`openai` or `anthropic`): how it is authorized, and
        which dialect (`proxy/dialects/`) writes its requests."""

    async def close(self) -> None:
        await self._pool.close()

    def headers_for(
        self, client_headers: Mapping[str, str], *, session_header: str, authorization: str | None
    ) -> CIMultiDict[str]:
        """Client headers less hop-by-hop and the proxy's own. Authorization is `authorization`
        (the client's own, outside gateway mode) or else this upstream's key: the client's
        header itself (`Authorization`, or Anthropic's `x-api-key`) never goes through, so a
        gateway key cannot reach the upstream."""
        headers = _without(client_headers, _not_forwarded(session_header))
        self._authorize(headers, authorization)
        return headers

    def _authorize(self, headers: CIMultiDict[str], authorization: str | None) -> None:
        """OpenAI's `Authorization: Bearer`; an Anthropic upstream's `x-api-key` (and the
        `anthropic-version` it requires, unless the client sent its own)."""
        secret = authorization[7:].strip() if authorization and authorization[:7].lower() == "bearer " else None
        if self.api == "anthropic":
            headers.setdefault("anthropic-version", ANTHROPIC_VERSION)
            key = secret or self._api_key
            if key:
                headers["x-api-key"] = key
            elif authorization:
                headers["Authorization"] = authorization
            return
        if authorization:
            headers["Authorization"] = authorization
        elif self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"

    async def send(
        self,
        method: str,
        v1_path: str,
        *,
        headers: CIMultiDict[str] | CIMultiDictProxy[str],
        body: Body = None,
        query: str = "",
        timeout_s: float | None = None,
    ) -> UpstreamResponse:
        """Send one request (`query`: its query string, still percent-encoded); the caller reads
        the response whole (which releases its connection) or streams it to its end, else
        `close()`s it. `timeout_s` replaces the upstream's whole-exchange timeout for this call."""
        target = v1_path[len("/v1") :] + ("?" + query if query else "")
        url = self._base + target
        if tracing.enabled():
            headers = CIMultiDict(headers)
            tracing.inject(headers)
        started = time.perf_counter()
        with _Mapped(url):
            response = await self._pool.request(
                method,
                target,
                headers.items(),
                body,
                timeout_s=timeout_s or self._timeout_s,
                read_timeout_s=None if timeout_s else self._read_timeout_s,
            )
        answer = UpstreamResponse(response, url)
        answer.seconds = time.perf_counter() - started
        return answer

    async def post_json(
        self, v1_path: str, body: bytes, *, authorization: str | None, timeout_s: float
    ) -> UpstreamResponse:
        """A proxy-initiated call (a compression request), with the client's key outside gateway mode."""
        headers: CIMultiDict[str] = CIMultiDict({"Content-Type": "application/json", "Accept-Encoding": "identity"})
        self._authorize(headers, authorization)
        return await self.send("POST", v1_path, headers=headers, body=body, timeout_s=timeout_s)
