"""A managed turn's lifecycle, told in order, with its dependencies in one object.

identify (the HTTP edge) -> load and reconcile (the request's system block apart from its
conversation; a derived session found by the conversation) -> count the new input -> fit under
budget (maybe compact, and land it; forced when the model called `new_context`) -> admit
(the caller's gateway limits) -> compose (with the proxy's context tools and the handoff
notice, `context_tools.py`) -> forward (once more, compacted, if the upstream names a smaller
window than assumed; then, while it fails before answering, the model's fallbacks, each
re-fitted to its own window) -> relay (through the proxy's tool rounds when its tools were
offered) -> record the turn (feeding its usage back) -> background work. `TurnDeps` is built once at start-up; nothing here
reaches into the application, so a second entry point (a session API call, a job)
reuses the same steps.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial

from aiohttp import web

from proxy import tracing
from proxy.compaction import BackgroundJobs, Fitted, Landing, fit, make_summarizer
from proxy.compaction.hooks import Hooks
from proxy.compaction.strategies import Strategy, StrategyRegistry, Summarizer, server_params, without_server
from proxy.config import Settings
from proxy.context.budget import Budget, ContextTooLarge, make_budget
from proxy.context.cache import PathCache
from proxy.context.limits import ModelLimits
from proxy.context.tokens import Encoder, TokenCounter
from proxy.context.window import archive_uri
from proxy.errors import UpstreamTimeout, UpstreamUnavailable
from proxy.events import EventBus, FallbackUsed, UpstreamAnswered, WindowLearned
from proxy.gateway import Admission, Gate, no_gate
from proxy.sessions import Identity, TurnDraft, message_hash
from proxy.sessions.reconcile import split_leading
from proxy.store import Store
from proxy.turn.background import background_job
from proxy.turn.builder import Builders, build_context
from proxy.turn.claim import CompactionClaim
from proxy.turn.context_tools import ContextTools, Prepared
from proxy.turn.conversation import Conversation, load_conversation
from proxy.turn.derived import DerivedSessions, new_session_id
from proxy.turn.facts import TurnFacts, fitting
from proxy.turn.fallback import Attempt, discard, fallback_reason, for_model
from proxy.turn.forward import CHAT_PATH, forward, refusal_message
from proxy.turn.pending import PendingWrites
from proxy.turn.projection import sent_history, sent_input
from proxy.turn.recorder import TurnRecorder
from proxy.turn.relay import Outcome, StreamRelay, relay_json
from proxy.turn.request import ChatRequest
from proxy.turn.rounds import ToolRounds
from proxy.types import Message
from proxy.upstream import Answer, Routes, UpstreamResponse

log = logging.getLogger("context_proxy.turn")

STRATEGY_HEADER = "X-Context-Strategy"


@dataclass(frozen=True)
class TurnDeps:
    """Everything a turn touches, built once at start-up."""

    settings: Settings
    store: Store
    routes: Routes
    """The upstream of each model (`routes`, else `upstream`)."""
    tokens: TokenCounter
    strategies: StrategyRegistry
    paths: PathCache
    limits: ModelLimits
    writes: PendingWrites
    jobs: BackgroundJobs
    events: EventBus
    derived: DerivedSessions
    hooks: Hooks | None = None
    builders: Builders | None = None


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class _Plan:
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


class TurnService:
    def __init__(self, deps: TurnDeps) -> None:
        self.deps = deps
        self._tools = ContextTools(deps.settings.context, deps.store, deps.events)

    async def begin(self, chat: ChatRequest, caller: Caller, spec: tuple[str, ...]) -> ActiveTurn:
        """Load, reconcile, fit under budget and forward; the answer is not read yet."""
        d = self.deps
        leading, messages = split_leading(chat.messages)
        with tracing.span("load") as span:
            conversation = await self._load(caller, messages)
            span.set("session", conversation.identity.session)
        encoder = await d.tokens.encoder_for(chat.model)
        conversation, system = await self._with_request_system(conversation, leading, encoder)
        strategy = d.strategies.build(spec, chat.model)
        params = server_params(strategy)
        if params:
            chat = replace(chat, body={**params, **chat.body})  # the client's own keys win
        window_id = conversation.stored_window.current
        plan = _Plan(
            chat=chat,
            caller=caller,
            conversation=conversation,
            encoder=encoder,
            new_tokens=await d.tokens.count_messages(encoder, conversation.reconciled.new_input),
            overhead=self._tools.overhead(chat, encoder, window_id),
            strategy=strategy,
            summarizer=self._summarizer(chat.model, caller),
            landing=Landing(
                d.store, conversation.keys, d.events, d.settings.sessions.ttl_s, caller.request_id, hooks=d.hooks
            ),
            system=system,
            forced=await self._tools.forced(chat.model, conversation.keys, window_id),
        )
        plan, fitted, budget = await self._fit_under_budget(plan)
        admission = await caller.gate(fitted.tokens + sum(plan.new_tokens) + plan.overhead + chat.max_output_tokens)
        attempt, prepared = await self._forward(plan, fitted, budget)
        if (
            isinstance(attempt, UpstreamResponse)
            and fitted.result is None
            and await self._window_learned(plan, attempt)
        ):
            attempt.close()
            plan = replace(plan, strategy=without_server(plan.strategy))  # server(x): x compacts now
            plan, fitted, budget = await self._fit_under_budget(plan)
            attempt, prepared = await self._forward(plan, fitted, budget)
        plan, fitted, budget, (attempt, prepared) = await self._fall_back(plan, fitted, budget, (attempt, prepared))
        if not isinstance(attempt, UpstreamResponse):
            raise attempt
        answer = attempt
        if not prepared.tools:
            return ActiveTurn(self.deps, plan, fitted, budget, answer, prepared.extra_tokens, admission=admission)
        sent = fitted.tokens + sum(plan.new_tokens) + prepared.extra_tokens
        rounds = self._tools.rounds(
            answer, prepared, send=partial(self._send, plan), keys=plan.conversation.keys, encoder=plan.encoder,
            room=budget.context_window - budget.reserve - sent, request_id=caller.request_id,
        )  # fmt: skip
        return ActiveTurn(self.deps, plan, fitted, budget, rounds, prepared.extra_tokens, rounds, admission=admission)

    async def _fall_back(
        self, plan: _Plan, fitted: Fitted, budget: Budget, sent: tuple[Attempt, Prepared]
    ) -> tuple[_Plan, Fitted, Budget, tuple[Attempt, Prepared]]:
        """The model's `fallbacks`, in order, while the last attempt calls for one; each is
        re-fitted to its own window first (compacted with the session's strategy if the
        context does not fit it). A fallback whose window cannot hold the turn is skipped."""
        requested = plan
        for model in self.deps.settings.context.for_model(requested.chat.model).fallbacks:
            reason = fallback_reason(sent[0])
            if reason is None:
                break
            try:
                retry, retry_fitted, retry_budget = await self._fit_under_budget(await self._retarget(requested, model))
            except ContextTooLarge:
                continue
            discard(sent[0])
            self.deps.events.emit(FallbackUsed(requested.chat.model, model, reason, requested.caller.request_id))
            plan, fitted, budget = retry, retry_fitted, retry_budget
            sent = await self._forward(plan, fitted, budget)
        return plan, fitted, budget, sent

    async def _retarget(self, plan: _Plan, model: str) -> _Plan:
        """The plan for a fallback model: its request, encoder, counts and compression model."""
        d = self.deps
        chat = for_model(plan.chat, model)
        encoder = await d.tokens.encoder_for(model)
        return replace(
            plan,
            chat=chat,
            encoder=encoder,
            new_tokens=await d.tokens.count_messages(encoder, plan.conversation.reconciled.new_input),
            overhead=self._tools.overhead(chat, encoder, plan.conversation.stored_window.current),
            strategy=without_server(plan.strategy),
            summarizer=self._summarizer(model, plan.caller),
        )

    def _summarizer(self, model: str, caller: Caller) -> Summarizer:
        context = self.deps.settings.context
        compression_model = context.compression_model or model
        return make_summarizer(
            self.deps.routes.client_for(compression_model),
            model=compression_model,
            authorization=caller.authorization,
            timeout_s=context.compression_timeout_s,
        )

    async def _load(self, caller: Caller, messages: list[Message]) -> Conversation:
        """The named session, or the derived one the conversation continues, or a new one."""
        d = self.deps
        if caller.session is not None:
            return await load_conversation(d.store, d.paths, Identity(caller.tenant, caller.session, False), messages)
        found = await d.derived.find(caller.tenant, messages)
        if found is not None:
            conversation = await load_conversation(d.store, d.paths, Identity(caller.tenant, found, True), messages)
            if not conversation.reconciled.from_root:
                return conversation
        identity = Identity(caller.tenant, new_session_id(), derived=True)
        return Conversation.new(identity, messages, [message_hash(m) for m in messages])

    async def _with_request_system(
        self, conversation: Conversation, leading: list[Message], encoder: Encoder
    ) -> tuple[Conversation, tuple[list[Message], list[int]] | None]:
        """The request's leading block replaces the session's for this turn (the latest wins)."""
        if not leading:
            return conversation, None
        hashes = tuple(message_hash(m) for m in leading)
        history = conversation.history
        if hashes == history.window.leading_hashes:
            return conversation, None
        tokens = await self.deps.tokens.count_messages(encoder, leading)
        history = history.with_leading(leading, tokens, hashes)
        return replace(conversation, history=history), (leading, tokens)

    async def _fit_under_budget(self, plan: _Plan) -> tuple[_Plan, Fitted, Budget]:
        """Check the budget, compact if the strategy says so, and land what happened.

        One compaction per session at a time: a request that finds another compacting
        waits for it, reloads the session (its window has moved on) and fits that."""
        d = self.deps
        claim = CompactionClaim(d.store, plan.conversation.keys.compaction_lock, self._claim_ttl_s)
        with tracing.span("compaction", strategy=plan.strategy.name) as span:
            try:
                budget = self._budget(plan)
                fitted = await self._fit(plan, budget, claim)
                if fitted.contended:
                    await claim.wait(d.settings.context.compression_timeout_s)
                    plan = await self._reload(plan)
                    budget = self._budget(plan)
                    fitted = await self._fit(plan, budget, claim)
                conversation = plan.conversation
                await plan.landing.settle(fitted, conversation.stored_window, conversation.breaker, plan.strategy.name)
                if plan.forced:
                    await self._tools.done_forcing(conversation.keys)
            finally:
                await claim.release()
            span.set("context.compaction", fitting(fitted))
        return plan, fitted, budget

    @property
    def _claim_ttl_s(self) -> float:
        return self.deps.settings.context.compression_timeout_s * 2

    async def _reload(self, plan: _Plan) -> _Plan:
        """The plan over the session as it is now (another request compacted it meanwhile)."""
        d = self.deps
        leading, messages = split_leading(plan.chat.messages)
        conversation = await load_conversation(d.store, d.paths, plan.conversation.identity, messages)
        conversation, system = await self._with_request_system(conversation, leading, plan.encoder)
        new_tokens = await d.tokens.count_messages(plan.encoder, conversation.reconciled.new_input)
        forced = await self._tools.forced(plan.chat.model, conversation.keys, conversation.stored_window.current)
        return replace(plan, conversation=conversation, system=system, new_tokens=new_tokens, forced=forced)

    async def _fit(self, plan: _Plan, budget: Budget, claim: CompactionClaim) -> Fitted:
        """The history as sent (preferred replies, mechanical clearing), fitted by the strategy,
        or chosen by the configured context builder."""
        d, conversation, model = self.deps, plan.conversation, plan.chat.model
        history = await sent_history(
            conversation.history, store=d.store, keys=conversation.keys, context=d.settings.context, model=model,
            encoder=plan.encoder,
        )  # fmt: skip
        builder = d.builders.for_model(model) if d.builders else None
        if builder is not None:
            built = await build_context(
                builder, store=d.store, keys=conversation.keys, history=history,
                parent=conversation.reconciled.parent, from_root=conversation.reconciled.from_root,
                new_input=conversation.reconciled.new_input, encoder=plan.encoder,
            )  # fmt: skip
            budget.require_fit(built.total + sum(plan.new_tokens))
            return Fitted(built, built.total)
        before = d.hooks.before_for(
            session=conversation.identity.session, request_id=plan.caller.request_id, encoder=plan.encoder,
            events=d.events,
        ) if d.hooks else None  # fmt: skip
        return await fit(
            history,
            new_tokens=sum(plan.new_tokens),
            budget=budget,
            strategy=plan.strategy,
            summarizer=plan.summarizer,
            archive_uri=archive_uri(history.window.next_id),
            count_text=lambda text: len(plan.encoder.encode_ordinary(text)),
            breaker=conversation.breaker,
            usage=conversation.usage,
            preference=self.deps.settings.context.usage_preference,
            claim=claim.acquire,
            before=before,
            forced=plan.forced,
        )

    def _configured_window(self, model: str) -> int:
        context = self.deps.settings.context
        return context.for_model(model).context_window or context.context_window

    def _budget(self, plan: _Plan) -> Budget:
        context, model = self.deps.settings.context, plan.chat.model
        return make_budget(
            context_window=self.deps.limits.window(model, self._configured_window(model)),
            trigger_ratio=context.for_model(model).trigger_ratio or context.trigger_ratio,
            max_output_tokens=plan.chat.max_output_tokens,
            overhead=plan.overhead,
            calibration=self.deps.tokens.calibration(model, plan.encoder),
        )

    async def _forward(self, plan: _Plan, fitted: Fitted, budget: Budget) -> tuple[Attempt, Prepared]:
        """Compose and send; an upstream that cannot be reached in time is an attempt too (fallbacks follow it)."""
        conversation, strategy = plan.conversation, plan.strategy
        compacts = server_params(strategy) is None and strategy.name != "full"  # else no handoff notice
        prepared = await self._tools.prepare(
            plan.chat, fitted, sent_input(conversation.reconciled.new_input, self.deps.settings.context),
            keys=conversation.keys, encoder=plan.encoder, trigger=budget.trigger if compacts else None,
            new_tokens=sum(plan.new_tokens),
            usage=conversation.usage, overhead=plan.overhead, request_id=plan.caller.request_id,
        )  # fmt: skip
        try:
            return await self._send(plan, prepared.chat, prepared.messages_json), prepared
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            return exc, prepared

    async def _send(self, plan: _Plan, chat: ChatRequest, messages_json: bytes) -> UpstreamResponse:
        d = self.deps
        with tracing.span("upstream", model=chat.model, stream=chat.stream) as span:
            answer, seconds = await forward(
                d.routes.client_for(chat.model),
                chat,
                messages_json,
                plan.caller.headers,
                session_header=d.settings.sessions.header,
                authorization=plan.caller.authorization,
            )
            span.set("http.response.status_code", answer.status)
        d.events.emit(UpstreamAnswered(CHAT_PATH, answer.status, seconds, plan.caller.request_id))
        return answer

    async def _window_learned(self, plan: _Plan, answer: UpstreamResponse) -> bool:
        """Whether the upstream refused the prompt as too long, naming a smaller window than assumed."""
        message = await refusal_message(answer)
        if message is None:
            return False
        model = plan.chat.model
        configured = self._configured_window(model)
        window = self.deps.limits.learn(model, message, configured)
        if window is None:  # a server-managed request compacts with its fallback on any such refusal
            return server_params(plan.strategy) is not None and "maximum context length" in message.lower()
        self.deps.events.emit(WindowLearned(model, window, configured, plan.caller.request_id))
        return True


class ActiveTurn:
    """A turn whose request went upstream: relay the answer, record it, start background work."""

    def __init__(
        self, deps: TurnDeps, plan: _Plan, fitted: Fitted, budget: Budget, answer: Answer, extra_tokens: int = 0,
        rounds: ToolRounds | None = None, admission: Admission | None = None,
    ) -> None:  # fmt: skip
        self._deps = deps
        self._admission = admission
        self._plan = plan
        self._fitted = fitted
        self._budget = budget
        self._answer = answer
        self._rounds = rounds
        self.sent_tokens = fitted.tokens + sum(plan.new_tokens) + plan.overhead + extra_tokens
        self.window_id = fitted.history.window.current
        self._outcome: Outcome | None = None

    def response_headers(self) -> dict[str, str]:
        return {
            "X-Session-Id": self._plan.conversation.identity.session,
            "X-Context-Window-Id": self.window_id,
            "X-Context-Tokens": str(self.sent_tokens),
            STRATEGY_HEADER: self._plan.strategy.name,
            "X-Request-Id": self._plan.caller.request_id,
        }

    async def relay(self, request: web.Request) -> web.StreamResponse:
        """Relay the answer; the turn is journaled before the client sees its end."""
        plan, recorder = self._plan, self._recorder()
        try:
            if plan.chat.stream:
                relay = StreamRelay(self._answer, include_usage=plan.chat.include_usage)
                response = await relay.run(request, self.response_headers(), before_end=recorder.record)
            else:
                response, outcome = await relay_json(request, self._answer, self.response_headers())
                await recorder.record(outcome)
        finally:
            await recorder.record(Outcome("canceled"))
            self._outcome = recorder.outcome
        self._log()
        if self._fitted.deferred:
            self._start_background()
        return response

    def facts(self) -> TurnFacts:
        """What this turn was, for the access log, the metrics and the trace."""
        plan, outcome = self._plan, self._outcome
        prompt, completion = TurnFacts.usage_of(outcome.usage if outcome else None)
        return TurnFacts(
            session=plan.conversation.identity.session,
            tenant=plan.caller.tenant,
            window=self.window_id,
            strategy=plan.strategy.name,
            status=outcome.status if outcome else "canceled",
            sent_tokens=self.sent_tokens,
            prompt_tokens=prompt,
            completion_tokens=completion,
            compaction=fitting(self._fitted),
            upstream_s=self._answer.seconds,
        )

    def _recorder(self) -> TurnRecorder:
        d, plan = self._deps, self._plan
        reconciled = plan.conversation.reconciled
        draft = TurnDraft(
            model=plan.chat.model,
            input=reconciled.new_input,
            input_tokens=plan.new_tokens,
            input_hashes=reconciled.new_hashes,
            encoding=plan.encoder.name,
            request_id=plan.caller.request_id,
            window=self.window_id,
            stream=plan.chat.stream,
            context_tokens=self.sent_tokens,
            system=plan.system[0] if plan.system else None,
            system_tokens=plan.system[1] if plan.system else [],
        )
        return TurnRecorder(
            store=d.store,
            writes=d.writes,
            tokens=d.tokens,
            keys=plan.conversation.keys,
            parent=reconciled.parent,
            draft=draft,
            sent_tokens=self.sent_tokens,
            encoder=plan.encoder,
            ttl_s=d.settings.sessions.ttl_s,
            derived=d.derived if plan.conversation.identity.derived else None,
            rounds=self._rounds,
            admission=self._admission,
        )

    def _start_background(self) -> None:
        d, plan = self._deps, self._plan
        job = background_job(
            landing=plan.landing,
            paths=d.paths,
            identity=plan.conversation.identity,
            strategy=plan.strategy,
            summarizer=plan.summarizer,
            budget=self._budget,
            encoder=plan.encoder,
            lock_ttl_s=d.settings.context.compression_timeout_s * 2,
        )
        d.jobs.submit(plan.conversation.keys.name, job)

    def _log(self) -> None:
        if not log.isEnabledFor(logging.DEBUG):
            return
        plan, fitted = self._plan, self._fitted
        log.debug(
            "chat request=%s session=%s window=%s strategy=%s sent_tokens=%d new_messages=%d parent=%s compaction=%s",
            plan.caller.request_id, plan.conversation.identity.session, self.window_id, plan.strategy.name,
            self.sent_tokens, len(plan.conversation.reconciled.new_input), plan.conversation.reconciled.parent,
            fitted.result.strategy if fitted.result else fitted.failure or fitted.skipped,
        )  # fmt: skip
