"""Sending a composed request upstream in its route's dialect, and reading a refusal that
names the model's window."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import orjson

from proxy.config import Settings
from proxy.context.model import ChatRequest
from proxy.dialects import dialect_for
from proxy.errors import ProxyError
from proxy.turn.plan import Caller
from proxy.types import JSONObject, frozen
from proxy.upstream import Answer, UpstreamClient


@frozen
class Sent:
    answer: Answer
    """Unread, and read as Chat Completions whatever the upstream's API."""
    path: str
    seconds: float
    """From sending to the answer's headers."""


async def forward(
    upstream: UpstreamClient,
    chat: ChatRequest,
    messages_json: bytes,
    client_headers: Mapping[str, str],
    *,
    session_header: str,
    authorization: str | None,
    default_max_tokens: int,
    unmarked: bool = False,
) -> Sent:
    """Send the composed request in the upstream's dialect (`unmarked`: see `Dialect.request`)."""
    dialect = dialect_for(upstream.api)
    outgoing = dialect.request(chat, messages_json, default_max_tokens=default_max_tokens, unmarked=unmarked)
    headers = upstream.headers_for(client_headers, session_header=session_header, authorization=authorization)
    headers["Content-Type"] = "application/json"
    headers.popall("Content-Encoding", None)  # the body is re-serialized, unencoded
    headers["Accept-Encoding"] = "identity"
    for name, tokens in outgoing.headers.items():
        own = [t.strip() for t in headers.get(name, "").split(",") if t.strip()]
        headers[name] = ",".join(dict.fromkeys([*own, *tokens.split(",")]))
    loop = asyncio.get_running_loop()
    started = loop.time()
    answer = await upstream.send("POST", outgoing.path, headers=headers, body=outgoing.body)
    return Sent(dialect.answer(answer), outgoing.path, loop.time() - started)


async def send_as_is(upstream: UpstreamClient, chat: ChatRequest, caller: Caller, *, settings: Settings) -> Answer:
    """A request the proxy does not manage (nothing composed, nothing journaled), in the
    upstream's dialect: its messages as the client sent them."""
    sent = await forward(
        upstream, chat, orjson.dumps(chat.messages), caller.headers, session_header=settings.sessions.header,
        authorization=caller.authorization, default_max_tokens=settings.context.max_tokens_for(chat.model),
    )  # fmt: skip
    return sent.answer


async def refusal(answer: Answer) -> JSONObject | None:
    """The parsed body of a refusal that may name the model's window (a 400, or TGI's 422); None
    for any other answer, which is left unread for the relay."""
    if answer.status not in (400, 422):
        return None
    try:
        body = orjson.loads(await answer.read())
    except (orjson.JSONDecodeError, ProxyError):
        return None
    return body if isinstance(body, dict) else None
