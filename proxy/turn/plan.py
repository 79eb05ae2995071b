"""What a turn is given: its dependencies (`TurnDeps`, built once at start-up), its caller
(`Caller`, as the HTTP edge identified it) and its plan (`Plan`, what the budget,
compaction and forward steps of one request need)."""

from __future__ import annotations

from collections.abc import Mapping

from proxy.compaction import BackgroundJobs, Landing
from proxy.compaction.hooks import Hooks
from proxy.compaction.strategies import Strategy, StrategyRegistry, Summarizer
from proxy.config import Settings
from proxy.context.model import ChatRequest
from proxy.context.tokens import Encoder, TokenCounter
from proxy.events import EventBus
from proxy.gateway import Gate, no_gate
from proxy.sessions.derived import DerivedSessions
from proxy.store import Store
from proxy.turn.builder import Builders
from proxy.turn.conversation import Conversation
from proxy.turn.paths import PathCache
from proxy.turn.pending import PendingWrites
from proxy.turn.savings import ClientCount
from proxy.turn.shadow import ShadowTurn
from proxy.turn.windows import ModelWindows
from proxy.types import Message, frozen
from proxy.upstream import Routes


@frozen
class TurnDeps:
    """Everything a turn touches, built once at start-up."""

    settings: Settings
    store: Store
    routes: Routes
    """The upstream of each model (`routes`, else `upstream`)."""
    tokens: TokenCounter
    strategies: StrategyRegistry
    paths: PathCache
    windows: ModelWindows
    writes: PendingWrites
    jobs: BackgroundJobs
    events: EventBus
    derived: DerivedSessions
    hooks: Hooks | None = None
    builders: Builders | None = None


@frozen
class Caller:
    """Who asks, as the HTTP edge identified them."""

    tenant: str
    session: str | None
    """The session the caller named; None: found (or started) from the conversation."""
    authorization: str | None
    headers: Mapping[str, str]
    """The client's request headers (forwarded upstream less hop-by-hop and the proxy's own)."""
    request_id: str
    gate: Gate = no_gate
    """Admits the turn against the caller's gateway key limits, once its prompt is counted."""
    door: str = "chat"
    """The client API the request came through: recorded with the turn, nothing else reads it."""
    door_id: str | None = None
    """The id that API gives the answer (a Responses API response's), recorded with the turn."""
    mode: str | None = None
    """The caller's gateway key's `mode` (`managed` or `shadow`); None: the model's or `context.mode`."""
    keep: bool = True
    """False: nothing of the turn is kept (a Responses API request with `store: false`): the
    conversation is the request's own, composed under budget, and neither journaled nor given
    a stored window."""


@frozen
class Plan:
    """What the budget and compaction steps of one turn need."""

    chat: ChatRequest
    caller: Caller
    conversation: Conversation
    encoder: Encoder
    new_tokens: list[int]
    overhead: int
    strategy: Strategy
    summarizer: Summarizer
    landing: Landing
    system: tuple[list[Message], list[int]] | None
    """The request's own leading block and its token counts, when it differs from the session's."""
    forced: bool
    """The model asked for a new context (`new_context`): compact whatever the budget says."""
    client: ClientCount
    """The request's prompt as the client sent it (the savings figures, `savings.py`)."""
    shadow: ShadowTurn | None = None
    """A shadow turn (`shadow.py`): what managed mode would have sent; None: a managed turn."""
