"""What one layer of the HTTP edge leaves on a request for another (typed request keys)."""

from __future__ import annotations

from aiohttp import web

RESPONSE_STARTED = web.RequestKey("response_started", bool)
"""Set once a response's headers have gone out: an error after that cannot become a response."""
PROXY_ERROR = web.RequestKey("proxy_error", str)
"""The code of an error the proxy answered with, or ended a started stream with."""
