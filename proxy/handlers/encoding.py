"""Request bodies in a `Content-Encoding`: gzip and deflate are read, anything else is refused.

The application reads bodies as they arrive (aiohttp's own decompression is off, so
that its plain-text 400 for brotli or zstd never reaches a client, and a passed-through
body goes upstream with the encoding it came in). The managed path decodes here:
gzip (`x-gzip`) and deflate (zlib-wrapped or raw), stacked in the order listed;
`identity` is nothing. Any other encoding is a 415 `unsupported_content_encoding`, a
body that is not what its encoding says a 400 `invalid_content_encoding`, and one that
inflates past the body limit a 413: every one in OpenAI's error shape.
"""

from __future__ import annotations

import zlib

from proxy.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

_GZIP = 16 + zlib.MAX_WBITS
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS
_WBITS = {"gzip": (_GZIP,), "x-gzip": (_GZIP,), "deflate": (_ZLIB, _RAW)}


def decode_body(raw: bytes, content_encoding: str | None, limit: int) -> bytes:
    """The body as the client meant it, at most `limit` bytes once decoded."""
    if not content_encoding:
        return raw
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    for coding in codings:
        if coding != "identity" and coding not in _WBITS:
            raise UnsupportedMediaType(
                f"Content-Encoding {coding!r} is not supported; send gzip, deflate or an unencoded body",
                param="Content-Encoding",
            )
    body = raw
    for coding in reversed(codings):
        if coding != "identity":
            body = _inflate(body, coding, limit)
    return body


def _inflate(data: bytes, coding: str, limit: int) -> bytes:
    for wbits in _WBITS[coding]:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(data, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit:
            raise PayloadTooLarge(f"request body is over the limit of {limit} bytes once decoded")
        if inflater.eof and not inflater.unused_data:
            return out
    raise BadRequest(
        f"request body is not valid {coding} data (Content-Encoding says it is)",
        param="Content-Encoding",
        code="invalid_content_encoding",
    )
