"""The session inspector: the static page at `/ui/`, served from the package.

The page holds no data and no secret: it asks for an API key, keeps it in the
browser's session storage and reads the tenant-scoped session API with it, so a key
sees exactly what the JSON API shows that key. Every file goes out with a strict
Content-Security-Policy: scripts, styles and requests only from this origin, no inline
script or style, no framing, no plugins.
"""

from __future__ import annotations

import re
from importlib import resources

from aiohttp import web

from proxy.errors import NotFound

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
CONTENT_TYPES = {"html": "text/html", "css": "text/css", "js": "text/javascript"}
_ASSET = re.compile(r"[a-z0-9-]+\.(html|css|js)")


async def redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound("/ui/")


async def index(request: web.Request) -> web.Response:
    return _serve("index.html")


async def asset(request: web.Request) -> web.Response:
    return _serve(request.match_info["asset"])


def _serve(name: str) -> web.Response:
    match = _ASSET.fullmatch(name)
    source = resources.files("proxy").joinpath("ui", name)
    if match is None or not source.is_file():
        raise NotFound(f"no file {name!r} in the session inspector")
    return web.Response(
        body=source.read_bytes(), content_type=CONTENT_TYPES[match.group(1)], charset="utf-8", headers=HEADERS
    )
