"""A managed turn's lifecycle: load and reconcile, fit under budget, forward, fall back,
tool rounds, record.

`TurnService` runs it with the dependencies of one `TurnDeps` built at start-up; the
turn never knows which door (`proxy/doors/`) its request came through.
"""

from proxy.context.model import ChatRequest
from proxy.turn.active import STRATEGY_HEADER, ActiveTurn
from proxy.turn.pending import PendingWrites
from proxy.turn.plan import Caller, TurnDeps
from proxy.turn.service import TurnService

__all__ = [
    "STRATEGY_HEADER",
    "ActiveTurn",
    "Caller",
    "ChatRequest",
    "PendingWrites",
    "TurnDeps",
    "TurnService",
]
