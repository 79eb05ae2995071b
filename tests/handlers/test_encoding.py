"""Request bodies in a `Content-Encoding`: gzip and deflate are read, anything else is refused
in OpenAI's shape (415), and a body that is not what its encoding says is a 400, never a 500."""

from __future__ import annotations

import dataclasses
import gzip
import zlib
from typing import Any

import aiohttp
import orjson
import pytest

from tests.conftest import Proxy, ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI

BODY = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "packed"}]})


def _raw_deflate(data: bytes) -> bytes:
    """Deflate with no zlib wrapper, as some clients send it."""
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


async def _post(proxy: Proxy, data: bytes, encoding: str, path: str = "/v1/chat/completions") -> tuple[int, Any]:
    headers = {"Authorization": "Bearer sk-test", "Content-Type": "application/json", "Content-Encoding": encoding}
    async with (
        aiohttp.ClientSession(auto_decompress=False) as http,
        http.post(proxy.url + path, data=data, headers=headers) as response,
    ):
        return response.status, orjson.loads(await response.read())


def _is_openai_error(body: Any, code: str) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") == code and set(error) == {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    ("encoding", "data"),
    [
        ("gzip", gzip.compress(BODY)),
        ("x-gzip", gzip.compress(BODY)),
        ("deflate", zlib.compress(BODY)),
        ("deflate", _raw_deflate(BODY)),
        ("identity", BODY),
        ("gzip, deflate", zlib.compress(gzip.compress(BODY))),
    ],
    ids=["gzip", "x-gzip", "deflate", "raw-deflate", "identity", "gzip-then-deflate"],
)
async def test_gzip_and_deflate_bodies_are_read(proxy: Proxy, encoding: str, data: bytes) -> None:
    status, body = await _post(proxy, data, encoding)
    assert status == 200, body
    assert proxy.fake.chats[-1]["messages"] == [{"role": "user", "content": "packed"}]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_body_that_is_not_its_encoding_is_a_400(proxy: Proxy, encoding: str) -> None:
    status, body = await _post(proxy, BODY, encoding)
    assert status == 400
    assert _is_openai_error(body, "invalid_content_encoding")


async def test_a_truncated_gzip_body_is_a_400(proxy: Proxy) -> None:
    status, body = await _post(proxy, gzip.compress(BODY)[:-12], "gzip")
    assert status == 400
    assert _is_openai_error(body, "invalid_content_encoding")


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/s/some-session/v1/chat/completions"])
@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "snappy", "gzip, br"])
async def test_other_encodings_are_refused_in_openai_shape(proxy: Proxy, encoding: str, path: str) -> None:
    status, body = await _post(proxy, b"\x1b\x00\x00garbage", encoding, path)
    assert status == 415
    assert _is_openai_error(body, "unsupported_content_encoding")


async def test_a_gzip_bomb_is_a_413(start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    proxy = await start_proxy(dataclasses.replace(settings, server=dataclasses.replace(settings.server, max_body_mb=1)))
    bomb = gzip.compress(b'{"model": "gpt-4o-mini", "messages": "' + b"a" * 5_000_000 + b'"}')
    assert len(bomb) < 1024 * 1024
    status, body = await _post(proxy, bomb, "gzip")
    assert status == 413
    assert _is_openai_error(body, "request_too_large")


async def test_a_passed_through_body_keeps_its_encoding(proxy: Proxy) -> None:
    """The upstream gets the bytes the client sent, with their Content-Encoding, and can read them."""
    status, body = await _post(proxy, gzip.compress(b"hello upstream"), "gzip", "/v1/echo/things")
    assert status == 200
    assert body["body"] == "hello upstream"
