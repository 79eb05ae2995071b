"""`GET /v1/sessions`: the caller's own sessions, most recently used first, in OpenAI's list shape.

Paged as OpenAI's lists are: `limit` (1-100, default 20) and `after` (the last id of
the previous page); `has_more` says whether another page follows.
"""

from __future__ import annotations

from aiohttp import web

from proxy.app_state import PRINCIPAL, SESSIONS
from proxy.errors import BadRequest
from proxy.sessions.identity import validate_session_id

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"limit must be an integer from 1 to {MAX_LIMIT}, got {raw!r}", param="limit")
    return int(raw)


async def list_sessions(request: web.Request) -> web.Response:
    limit = _limit(request.query.get("limit"))
    after = request.query.get("after")
    if after is not None:
        validate_session_id(after, "after")
    listing = await request.app[SESSIONS].listing(request[PRINCIPAL].tenant, after=after, limit=limit)
    if listing is None:
        raise BadRequest(f"after: no session {after!r} for this API key", param="after")
    return web.json_response(listing)
