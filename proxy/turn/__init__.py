"""A managed turn's lifecycle: load and reconcile, fit under budget, forward, relay, record.

`TurnService` runs it with the dependencies of one `TurnDeps` built at start-up;
`SessionAPI` answers the session endpoints from the same store and caches.
"""

from proxy.turn.active import STRATEGY_HEADER, ActiveTurn
from proxy.turn.pending import PendingWrites
from proxy.turn.plan import Caller, TurnDeps
from proxy.turn.request import ChatRequest
from proxy.turn.service import TurnService
from proxy.turn.session_api import SessionAPI, SessionNotFound

__all__ = [
    "STRATEGY_HEADER",
    "ActiveTurn",
    "Caller",
    "ChatRequest",
    "PendingWrites",
    "SessionAPI",
    "SessionNotFound",
    "TurnDeps",
    "TurnService",
]
