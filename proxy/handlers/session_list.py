"""`GET /v1/sessions`: the caller's own sessions, newest first, in OpenAI's list shape.

Paged as OpenAI's list endpoints are: `limit` (1-100, default 20) and `after` (the id
of the last session of the previous page); `has_more` says whether another page follows.
"""

from __future__ import annotations

from aiohttp import web

from proxy.errors import BadRequest
from proxy.keys import SETTINGS, STORE
from proxy.sessions import tenant_of
from proxy.sessions.identity import validate_session_id
from proxy.store import SessionInfo
from proxy.types import JSONObject

MAX_LIMIT = 100


async def list_sessions(request: web.Request) -> web.Response:
    tenant = tenant_of(request.headers.get("Authorization"), request.app[SETTINGS].upstream.api_key)
    after = request.query.get("after")
    if after is not None:
        validate_session_id(after, "after")
    infos, more = await request.app[STORE].list_sessions(tenant, limit=_limit(request.query.get("limit")), after=after)
    data = [_item(info) for info in infos]
    return web.json_response(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": more,
        }
    )


def _limit(raw: str | None) -> int:
    if raw is None:
        return 20
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_LIMIT}, got {raw!r}", param="limit")
    return int(raw)


def _item(info: SessionInfo) -> JSONObject:
    usage = info.usage or {}
    return {
        "id": info.session,
        "object": "session",
        "created": info.created,
        "last_used": info.last_used,
        "turns": info.turns,
        "window": info.window,
        "model": info.model,
        "tokens": usage.get("local"),
        "prompt_tokens": usage.get("prompt"),
    }
