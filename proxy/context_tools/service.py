"""What the context tools change in a turn: the forced compaction, the upstream request, the answer.

`ContextTools` is built once per `TurnService`. Before the budget step it says whether
the model asked for a new context in this window (`new_context`, a flag in the
session's meta). After it, `prepare` turns the fitted history into the first upstream
request: the proxy's tools added to the client's, and the handoff notice appended to
the last user message when the headroom is at most `handoff.budget_tokens` (claimed
once per window in the store). `rounds` wraps the answer when the proxy's tools were
offered, so their calls are answered here and never reach the client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

import orjson

from proxy.compaction import Fitted
from proxy.config import ContextSettings
from proxy.context.budget import effective_tokens
from proxy.context.compose import compose_messages, compose_screened
from proxy.context.model import ChatRequest
from proxy.context.tokens import Encoder, request_overhead
from proxy.context_tools import handoff
from proxy.context_tools.resolver import ToolResolver
from proxy.context_tools.rounds import ToolRounds
from proxy.context_tools.tools import ProxyTools, offer, with_tools
from proxy.events import EventBus, HandoffNoticed, ToolRound, ToolsShadowed
from proxy.store import SessionKeys, Store
from proxy.types import JSONObject, Message, frozen
from proxy.upstream import Answer


@frozen
class Prepared:
    """The first upstream request of a turn, as the context tools shaped it."""

    chat: ChatRequest
    """The client's request with the proxy's tools in its body."""
    messages_json: bytes
    window_id: str
    tools: ProxyTools
    extra_tokens: int
    """Tokens beyond the budget step's count: tools first offered after it, the notice."""
    unmarked: bool = False
    """`messages_json` is known to hold no mark of another API (`compose_screened`)."""

    def with_rounds(self, added: list[Message], offering: bool) -> tuple[ChatRequest, bytes]:
        """A later round's request: the same messages plus what the rounds added; the
        proxy's tools only while `offering`."""
        chat = self.chat
        if not offering:
            tools = [t for t in chat.body.get("tools") or () if t not in self.tools.definitions]
            body = {k: v for k, v in chat.body.items() if k != "tools"}
            chat = replace(chat, body={**body, "tools": tools} if tools else body)
        return chat, self.messages_json[:-1] + b"," + orjson.dumps(added)[1:]


@frozen
class Fill:
    """How full the turn's window is, as the handoff notice measures it."""

    encoder: Encoder
    trigger: int | None
    """None when the strategy never compacts (server-managed, `full`): no handoff notice then."""
    new_tokens: int
    """The new input's tokens."""
    usage: JSONObject | None
    """The session's fed-back usage: the headroom is measured as the trigger measures."""
    overhead: int
    """The reply primer and tool schemas the budget step reserved."""
    request_id: str


class ContextTools:
    def __init__(self, context: ContextSettings, store: Store, events: EventBus) -> None:
        self._context = context
        self._store = store
        self._events = events
        self._shadowed: set[str] = set()

    def tools_for(self, chat: ChatRequest, window_id: str) -> ProxyTools:
        return offer(self._context.tools_for(chat.model), chat.body, window_id)

    def overhead(self, chat: ChatRequest, encoder: Encoder, window_id: str) -> int:
        """The request's overhead (reply primer, tool schemas) with the proxy's tools offered in `window_id`."""
        return request_overhead(encoder, with_tools(chat.body, self.tools_for(chat, window_id)).get("tools"))

    async def forced(self, model: str, keys: SessionKeys, window_id: str) -> bool:
        """Whether the model called `new_context` in this window (one store read, only
        with `tools.new_context` on)."""
        if not self._context.tools_for(model).new_context:
            return False
        return await self._store.requested_compaction(keys) == window_id

    async def done_forcing(self, keys: SessionKeys) -> None:
        """A forced compaction ran (landed or not): the request is consumed."""
        await self._store.clear_compaction_request(keys)

    async def prepare(
        self, chat: ChatRequest, fitted: Fitted, new_input: list[Message], *, keys: SessionKeys, fill: Fill
    ) -> Prepared:
        """The first upstream request: the fitted history and `new_input` composed, the proxy's
        tools added, the handoff notice appended when `fill` says it is due."""
        history, encoder, request_id = fitted.history, fill.encoder, fill.request_id
        window_id = history.window.current
        tools = self.tools_for(chat, window_id)
        self._tell_shadowed(tools, request_id)
        body = with_tools(chat.body, tools)
        if body is not chat.body:
            chat = replace(chat, body=body)
        extra = request_overhead(encoder, body.get("tools")) - fill.overhead
        size = fitted.tokens + fill.new_tokens
        notice = await self._notice(chat.model, keys, window_id, fill.trigger, size, fill.usage, request_id)
        if notice is None:
            messages_json, unmarked = compose_screened(history, new_input)
            return Prepared(chat, messages_json, window_id, tools, extra, unmarked)
        messages = handoff.with_notice(compose_messages(history, new_input), notice)
        extra += len(encoder.encode_ordinary(notice))
        return Prepared(chat, orjson.dumps(messages), window_id, tools, extra)

    async def _notice(
        self, model: str, keys: SessionKeys, window_id: str, trigger: int | None, local: int,
        usage: JSONObject | None, request_id: str,
    ) -> str | None:  # fmt: skip
        """The handoff notice, when the headroom is within the budget and this window has
        not had it yet (claimed in the store, so once across replicas and restarts)."""
        settings = self._context.handoff_for(model)
        if settings is None or trigger is None:
            return None
        size = effective_tokens(local, usage, window_id=window_id, preference=self._context.usage_preference)
        room = handoff.headroom(trigger, size)
        if not handoff.due(settings, room) or not await self._store.claim_handoff(keys, window_id):
            return None
        self._events.emit(HandoffNoticed(keys.session, request_id, window_id, max(0, room)))
        return handoff.notice_text(settings.prompt, room)

    def _tell_shadowed(self, tools: ProxyTools, request_id: str) -> None:
        new = tuple(n for n in tools.shadowed if n not in self._shadowed)
        if new:
            self._shadowed.update(new)
            self._events.emit(ToolsShadowed(new, request_id))

    def rounds(
        self,
        answer: Answer,
        prepared: Prepared,
        *,
        send: Callable[[ChatRequest, bytes], Awaitable[Answer]],
        keys: SessionKeys,
        encoder: Encoder,
        room: int,
        request_id: str,
    ) -> ToolRounds:
        """`answer` read through the proxy's tool rounds, each later round sent with `send`
        as the first was; `room`: the tokens the rounds may add to the model's window."""
        resolver = ToolResolver(self._store, keys, prepared.window_id, encoder, room)

        async def send_round(added: list[Message], offering: bool) -> Answer:
            return await send(*prepared.with_rounds(added, offering))

        def on_round(number: int, names: tuple[str, ...]) -> None:
            self._events.emit(ToolRound(keys.session, request_id, number, names))

        return ToolRounds(answer, send=send_round, tools=prepared.tools, resolver=resolver, on_round=on_round)
