"""What the app and each request hold, by type (aiohttp's typed `AppKey` and `RequestKey`):
every shared resource the handlers reach, and what one layer leaves on a request for another."""

from __future__ import annotations

from aiohttp import web

from proxy.config import Settings
from proxy.doors.resent import ResentBodies
from proxy.gateway import Admission, Gateway, Principal
from proxy.metrics import Metrics
from proxy.metrics_peers import MetricPeers
from proxy.session_api import PastContexts, SessionAPI
from proxy.store import EmbeddedRedis, Store
from proxy.turn import TurnService
from proxy.turn.facts import TurnFacts
from proxy.upstream import Routes

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", Store)
EMBEDDED = web.AppKey("embedded", EmbeddedRedis)
METRICS = web.AppKey("metrics", Metrics)
ROUTES = web.AppKey("routes", Routes)
"""The upstream of each model: the first matching route, else `upstream`."""
GATEWAY = web.AppKey("gateway", Gateway)
TURNS = web.AppKey("turns", TurnService)
SESSIONS = web.AppKey("sessions", SessionAPI)
PAST_CONTEXTS = web.AppKey("past_contexts", PastContexts)
RESENT = web.AppKey("resent", ResentBodies)
"""The chat door's recent bodies, so a full-history client's resent conversation is not parsed again."""
PEERS = web.AppKey("peers", MetricPeers)
"""Set only in a worker of `serve --workers N`: `/metrics` then answers for every worker."""

ROUTE_MODEL = web.RequestKey("model", str)
REQUEST_ID = web.RequestKey("request_id", str)
"""Set by the access middleware on every request; a managed turn journals it."""
TURN_FACTS = web.RequestKey("turn_facts", TurnFacts)
"""Set by the chat handler once a managed turn is relayed; the access middleware logs it."""
PRINCIPAL = web.RequestKey("principal", Principal)
"""Who is calling (tenant, gateway key, what Authorization may go upstream), set by the gateway middleware."""
ADMISSION = web.RequestKey("admission", Admission)
RATE_HEADERS = web.RequestKey("rate_headers", dict[str, str])
