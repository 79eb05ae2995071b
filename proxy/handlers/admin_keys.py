"""`/admin/keys`: create, list and revoke gateway keys, with `Authorization: Bearer <gateway.admin_key>`.

With no admin key configured the admin API does not exist (404). A created key is
answered once, 201 `{"name", "key", ...}`; only its hash is kept.
"""

from __future__ import annotations

import hmac

import orjson
from aiohttp import web

from proxy.app_state import GATEWAY, SETTINGS
from proxy.errors import BadRequest, InvalidApiKey, NotFound
from proxy.gateway.admin import KeyAdmin
from proxy.gateway.service import bearer


def _admin(request: web.Request) -> KeyAdmin:
    admin_key = request.app[SETTINGS].gateway.admin_key
    if not admin_key:
        raise NotFound("Not Found: the admin API is off (gateway.admin_key is not set)")
    presented = bearer(request.headers.get("Authorization"))
    if not hmac.compare_digest(presented.encode(), admin_key.encode()):
        raise InvalidApiKey("incorrect admin key: send Authorization: Bearer <gateway.admin_key>")
    return request.app[GATEWAY].admin


async def create_key(request: web.Request) -> web.Response:
    admin = _admin(request)
    try:
        fields = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}", code="invalid_json") from exc
    if not isinstance(fields, dict):
        raise BadRequest("request body must be a JSON object", code="invalid_type")
    policy, secret = await admin.create(fields)
    return web.json_response({"object": "gateway.key", **policy.public(), "key": secret}, status=201)


async def list_keys(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": await _admin(request).list()})


async def revoke_key(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await _admin(request).revoke(name)
    return web.json_response({"object": "gateway.key.deleted", "name": name, "deleted": True})
