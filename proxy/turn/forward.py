"""Sending a composed request upstream, and reading a refusal that names the model's window.

The upstream body is the client's own with the composed messages spliced in (the
composed part is already serialized, so the rest of the body is serialized once and
joined); a streamed request always asks for `include_usage`, so the usage of every
answer can be fed back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import orjson

from proxy.errors import ProxyError
from proxy.turn.request import ChatRequest
from proxy.upstream import UpstreamClient, UpstreamResponse

CHAT_PATH = "/v1/chat/completions"


def upstream_body(chat: ChatRequest, messages_json: bytes) -> bytes:
    """The client's body with the composed messages spliced in; streams always ask for usage."""
    rest = {k: v for k, v in chat.body.items() if k != "messages"}
    if chat.stream:
        rest["stream_options"] = {**(chat.body.get("stream_options") or {}), "include_usage": True}
    others = orjson.dumps(rest)
    if others == b"{}":
        return b"".join((b'{"messages":', messages_json, b"}"))
    return b"".join((b'{"messages":', messages_json, b",", others[1:]))  # one copy of a large history


async def forward(
    upstream: UpstreamClient,
    chat: ChatRequest,
    messages_json: bytes,
    client_headers: Mapping[str, str],
    *,
    session_header: str,
    authorization: str | None,
) -> tuple[UpstreamResponse, float]:
    """Send the composed request; the answer (unread) and the seconds to its headers."""
    headers = upstream.headers_for(client_headers, session_header=session_header, authorization=authorization)
    headers["Content-Type"] = "application/json"
    headers.popall("Content-Encoding", None)  # the body is re-serialized, unencoded
    headers["Accept-Encoding"] = "identity"
    loop = asyncio.get_running_loop()
    started = loop.time()
    answer = await upstream.send("POST", CHAT_PATH, headers=headers, body=upstream_body(chat, messages_json))
    return answer, loop.time() - started


async def refusal_message(answer: UpstreamResponse) -> str | None:
    """The message of a 400 refusal (where a too-long prompt names the model's window); None
    for any other answer, which is left unread for the relay."""
    if answer.status != 400:
        return None
    try:
        body = orjson.loads(await answer.read())
    except (orjson.JSONDecodeError, ProxyError):
        return None
    if not isinstance(body, dict):
        return None
    nested = body.get("error")
    error = nested if isinstance(nested, dict) else body  # some servers answer without the "error" wrapper
    return str(error.get("message", ""))
