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

from dataclasses import replace
from functools import partial

import orjson

from proxy import tracing
from proxy.compaction import Fitted, Landing, Overflow, fit, make_summarizer
from proxy.compaction.breaker import Breaker
from proxy.compaction.strategies import Summarizer, server_params, without_server
from proxy.compaction.strategies.server import on_route, with_server_params
from proxy.context.budget import Budget, ContextTooLarge
from proxy.context.model import ChatRequest
from proxy.context.refusals import refusal_text, refused_window
from proxy.context.tokens import Encoder, count_text
from proxy.context.window import archive_uri
from proxy.context_tools.service import ContextTools, Fill, Prepared
from proxy.errors import ContextBuilderFailed, ProxyError, UpstreamTimeout, UpstreamUnavailable
from proxy.events import FallbackUsed, UpstreamAnswered, WindowLearned
from proxy.sessions import Identity, message_hash, wire
from proxy.sessions.derived import new_session_id
from proxy.sessions.reconcile import split_leading
from proxy.turn.active import ActiveTurn, turn_recorder
from proxy.turn.builder import build_context
from proxy.turn.claim import CompactionClaim, LoadedWindow
from proxy.turn.conversation import Conversation, load_conversation
from proxy.turn.facts import fitting
from proxy.turn.fallback import Attempt, discard, fallback_reason, for_model
from proxy.turn.forward import forward, refusal
from proxy.turn.importer import import_exchanges
from proxy.turn.outcome import Outcome
from proxy.turn.plan import Caller, Plan, TurnDeps
from proxy.turn.projection import sent_history, sent_input
from proxy.turn.savings import count_client
from proxy.turn.shadow import estimating_summarizer, last_state, shadow_history, shadow_turn, simulated
from proxy.types import Message, frozen
from proxy.upstream import Answer


@frozen
class Fit:
    """A plan fitted under its budget: what the forward step sends."""

    plan: Plan
    fitted: Fitted
    budget: Budget


@frozen
class Tried:
    """One forward of a fitted plan: what it came to, and the request it sent."""

    fit: Fit
    attempt: Attempt
    prepared: Prepared


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
        conversation = await import_exchanges(d, conversation, encoder, request_id=caller.request_id, keep=caller.keep)
        conversation, system = await self._with_request_system(conversation, leading, encoder, own=chat.own_system)
        new_tokens = await d.tokens.count_messages(encoder, conversation.reconciled.new_input)
        client = await count_client(d.tokens, encoder, conversation, (leading, messages, chat.body), new_tokens)
        api = d.routes.client_for(chat.model).api
        strategy = on_route(d.strategies.build(spec, chat.model), api, d.settings.context.server)
        params = server_params(strategy)
        if params:
            chat = replace(chat, body=with_server_params(chat.body, params))  # the client's own keys win
        window_id = conversation.stored_window.current
        plan = Plan(
            chat=chat,
            caller=caller,
            conversation=conversation,
            encoder=encoder,
            new_tokens=new_tokens,
            overhead=self._tools.overhead(chat, encoder, window_id),
            strategy=strategy,
            summarizer=self._summarizer(chat.model, caller),
            landing=Landing(
                d.store, conversation.keys, d.events, d.settings.sessions.ttl_s, caller.request_id, hooks=d.hooks
            ),
            system=system,
            forced=await self._tools.forced(chat.model, conversation.keys, window_id),
            client=client,
        )
        if caller.keep and (caller.mode or d.settings.context.mode_for(chat.model)) == "shadow":
            return await self._shadow(plan)
        fit = await self._fit_under_budget(plan)
        plan, fitted = fit.plan, fit.fitted
        admission = await caller.gate(fitted.tokens + sum(plan.new_tokens) + plan.overhead + chat.max_output_tokens)
        tried = await self._forward(fit)
        attempt = tried.attempt
        if not isinstance(attempt, ProxyError) and fitted.result is None and await self._window_learned(plan, attempt):
            attempt.close()
            plan = replace(plan, strategy=without_server(plan.strategy))  # server(x): x compacts now
            tried = await self._forward(await self._fit_under_budget(plan))
        tried = await self._fall_back(tried)
        plan, fitted, budget, prepared = tried.fit.plan, tried.fit.fitted, tried.fit.budget, tried.prepared
        if isinstance(tried.attempt, ProxyError):
            raise tried.attempt
        answer = tried.attempt
        if not prepared.tools:
            return ActiveTurn(self.deps, plan, fitted, budget, answer, prepared.extra_tokens, admission=admission)
        sent = fitted.tokens + sum(plan.new_tokens) + prepared.extra_tokens
        rounds = self._tools.rounds(
            answer, prepared, send=partial(self._send, plan), keys=plan.conversation.keys, encoder=plan.encoder,
            room=budget.context_window - budget.reserve - sent, request_id=caller.request_id,
        )  # fmt: skip
        return ActiveTurn(self.deps, plan, fitted, budget, rounds, prepared.extra_tokens, rounds, admission=admission)

    async def _shadow(self, plan: Plan) -> ActiveTurn:
        """Shadow mode: fit what managed mode would send (an estimating summarizer, nothing
        landed), then forward the client's own messages; the turn is journaled with both."""
        d, conversation = self.deps, plan.conversation
        history = shadow_history(
            await sent_history(
                conversation.history, store=d.store, keys=conversation.keys, context=d.settings.context,
                model=plan.chat.model, encoder=plan.encoder,
            ),
            last_state(conversation.history),
        )  # fmt: skip
        budget = self._budget(plan)
        compression_model = d.settings.context.compression_model or plan.chat.model
        overflow = Overflow(
            strategy=simulated(plan.strategy),
            summarizer=estimating_summarizer(
                plan.encoder, model=compression_model, max_tokens=d.settings.context.max_tokens_for(compression_model)
            ),
            count_text=partial(count_text, plan.encoder),
            breaker=Breaker(),
            usage=None,
            preference=d.settings.context.usage_preference,
        )
        new_tokens = sum(plan.new_tokens)
        fitted: Fitted | None
        try:
            fitted = await fit(history, new_tokens=new_tokens, budget=budget, archive_uri="", overflow=overflow)
            composed = fitted.tokens + new_tokens + plan.overhead
        except ContextTooLarge:
            fitted, composed = None, None
        plan = replace(plan, shadow=shadow_turn(fitted, composed, last_state(conversation.history)))
        admission = await plan.caller.gate(plan.client.tokens + plan.chat.max_output_tokens)
        answer = await self._send(plan, plan.chat, orjson.dumps([wire(m) for m in plan.chat.messages]))
        loaded = Fitted(conversation.history, conversation.history.total)  # the stored window, unchanged
        return ActiveTurn(d, plan, loaded, budget, answer, admission=admission)

    async def _fall_back(self, tried: Tried) -> Tried:
        """The model's `fallbacks`, in order, while the last attempt calls for one; each is
        re-fitted to its own window first (compacted with the session's strategy if the
        context does not fit it). A fallback whose window cannot hold the turn is skipped."""
        requested = tried.fit.plan
        for model in self.deps.settings.context.for_model(requested.chat.model).fallbacks:
            reason = fallback_reason(tried.attempt)
            if reason is None:
                break
            try:
                retry = await self._fit_under_budget(await self._retarget(requested, model))
            except ContextTooLarge:
                continue
            except BaseException:
                discard(tried.attempt)  # its connection goes back, whatever ends the turn here
                raise
            discard(tried.attempt)
            self.deps.events.emit(FallbackUsed(requested.chat.model, model, reason, requested.caller.request_id))
            tried = await self._forward(retry)
        return tried

    async def _retarget(self, plan: Plan, model: str) -> Plan:
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
            max_tokens=context.max_tokens_for(compression_model),
        )

    async def _load(self, caller: Caller, messages: list[Message]) -> Conversation:
        """The named session, or the derived one the conversation continues, or a new one."""
        d = self.deps
        if not caller.keep:
            identity = Identity(caller.tenant, new_session_id(), derived=False)
            return Conversation.new(identity, messages, [message_hash(m) for m in messages])
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
        self, conversation: Conversation, leading: list[Message], encoder: Encoder, *, own: bool
    ) -> tuple[Conversation, tuple[list[Message], list[int]] | None]:
        """The request's leading block replaces the session's for this turn (the latest wins); a
        request without one keeps the session's, unless its block is its `own` (even empty)."""
        if not leading and not own:
            return conversation, None
        history = conversation.history
        window = history.window
        if len(leading) == len(window.leading) == len(window.leading_hashes) and all(
            m == kept for m, kept in zip(leading, window.leading, strict=True)
        ):  # the same block as the session's (most requests that send one): nothing to hash
            return conversation, None
        hashes = tuple(message_hash(m) for m in leading)
        if hashes == window.leading_hashes:
            return conversation, None
        tokens = await self.deps.tokens.count_messages(encoder, leading)
        history = history.with_leading(leading, tokens, hashes)
        return replace(conversation, history=history), (leading, tokens)

    async def _fit_under_budget(self, plan: Plan) -> Fit:
        """Check the budget, compact if the strategy says so, and land what happened.

        One compaction per session at a time, computed from the stored window: a request that
        finds another compacting, or finds that another compaction landed since it loaded the
        session (the claim carries the window it loaded), waits for the claim, reloads the
        session under it and fits that. One that
        cannot get the claim in time goes as it is if that fits the window, else it is refused
        (`ContextTooLarge`): it never goes out over the window."""
        d = self.deps
        loaded = LoadedWindow(plan.conversation.keys, plan.conversation.stored_window.current)
        claim = CompactionClaim.for_window(d.store, loaded, self._claim_ttl_s)
        with tracing.span("compaction", strategy=plan.strategy.name) as span:
            try:
                budget = self._budget(plan)
                fitted = await self._fit(plan, budget, claim)
                if fitted.what == "contended":
                    await claim.wait(d.settings.context.compression_timeout_s)
                    plan = await self._reload(plan)
                    budget = self._budget(plan)
                    fitted = await self._fit(plan, budget, claim)
                    if fitted.what == "contended":  # the wait timed out and the other still holds the claim
                        budget.require_fit(fitted.tokens + sum(plan.new_tokens))
                conversation = plan.conversation
                if plan.caller.keep:
                    await plan.landing.settle(
                        fitted, conversation.stored_window, conversation.breaker, plan.strategy.name
                    )
                if plan.forced:
                    await self._tools.done_forcing(conversation.keys)
            finally:
                await claim.release()
            span.set("context.compaction", fitting(fitted))
        return Fit(plan, fitted, budget)

    @property
    def _claim_ttl_s(self) -> float:
        return self.deps.settings.context.compression_timeout_s * 2

    async def _reload(self, plan: Plan) -> Plan:
        """The plan over the session as it is now (another request compacted it meanwhile)."""
        d = self.deps
        leading, messages = split_leading(plan.chat.messages)
        conversation = await load_conversation(d.store, d.paths, plan.conversation.identity, messages)
        conversation, system = await self._with_request_system(
            conversation, leading, plan.encoder, own=plan.chat.own_system
        )
        new_tokens = await d.tokens.count_messages(plan.encoder, conversation.reconciled.new_input)
        forced = await self._tools.forced(plan.chat.model, conversation.keys, conversation.stored_window.current)
        return replace(plan, conversation=conversation, system=system, new_tokens=new_tokens, forced=forced)

    async def _fit(self, plan: Plan, budget: Budget, claim: CompactionClaim) -> Fitted:
        """The history as sent (preferred replies, mechanical clearing), fitted by the strategy,
        or chosen by the configured context builder."""
        d, conversation, model = self.deps, plan.conversation, plan.chat.model
        history = await sent_history(
            conversation.history, store=d.store, keys=conversation.keys, context=d.settings.context, model=model,
            encoder=plan.encoder,
        )  # fmt: skip
        builder = d.builders.for_model(model) if d.builders else None
        if builder is not None:
            try:
                built = await build_context(
                    builder, store=d.store, keys=conversation.keys, history=history,
                    parent=conversation.reconciled.parent, from_root=conversation.reconciled.from_root,
                    new_input=conversation.reconciled.new_input, encoder=plan.encoder,
                )  # fmt: skip
            except ContextBuilderFailed as exc:  # june: a build() that throws fails the turn, journaled
                await self._record_failed(plan, exc)
                raise
            budget.require_fit(built.total + sum(plan.new_tokens))
            return Fitted(built, built.total)
        before = d.hooks.before_for(
            session=conversation.identity.session, request_id=plan.caller.request_id, encoder=plan.encoder,
            events=d.events,
        ) if d.hooks else None  # fmt: skip
        overflow = Overflow(
            strategy=plan.strategy,
            summarizer=plan.summarizer,
            count_text=partial(count_text, plan.encoder),
            breaker=conversation.breaker,
            usage=conversation.usage,
            preference=self.deps.settings.context.usage_preference,
            claim=claim.acquire,
            before=before,
            forced=plan.forced,
        )
        new_tokens, uri = sum(plan.new_tokens), archive_uri(history.window.next_id)
        return await fit(history, new_tokens=new_tokens, budget=budget, archive_uri=uri, overflow=overflow)

    async def _record_failed(self, plan: Plan, exc: ProxyError) -> None:
        """Journal the turn as `failed` with `exc` before anything went upstream: its input is
        kept (the session API and the inspector show it), never in a later context."""
        recorder = turn_recorder(self.deps, plan, window_id=plan.conversation.stored_window.current, sent_tokens=0)
        await recorder.record(Outcome("failed", error={"status": exc.status, "code": exc.code, "message": exc.message}))

    def _budget(self, plan: Plan) -> Budget:
        chat = plan.chat
        return self.deps.windows.budget(
            chat.model, plan.encoder, max_output_tokens=chat.max_output_tokens, overhead=plan.overhead
        )

    async def _forward(self, fit: Fit) -> Tried:
        """Compose and send; an upstream that cannot be reached in time is an attempt too (fallbacks follow it)."""
        plan, fitted, budget = fit.plan, fit.fitted, fit.budget
        conversation, strategy = plan.conversation, plan.strategy
        compacts = server_params(strategy) is None and strategy.name != "full"  # else no handoff notice
        fill = Fill(
            plan.encoder, budget.trigger if compacts else None, sum(plan.new_tokens), conversation.usage, plan.overhead,
            plan.caller.request_id,
        )  # fmt: skip
        new_input = sent_input(conversation.reconciled.new_input, self.deps.settings.context)
        prepared = await self._tools.prepare(plan.chat, fitted, new_input, keys=conversation.keys, fill=fill)
        try:
            answer = await self._send(plan, prepared.chat, prepared.messages_json, unmarked=prepared.unmarked)
            return Tried(fit, answer, prepared)
        except (UpstreamUnavailable, UpstreamTimeout) as exc:
            return Tried(fit, exc, prepared)

    async def _send(self, plan: Plan, chat: ChatRequest, messages_json: bytes, *, unmarked: bool = False) -> Answer:
        d = self.deps
        upstream = d.routes.client_for(chat.model)
        with tracing.span("upstream", model=chat.model, stream=chat.stream) as span:
            sent = await forward(
                upstream,
                chat,
                messages_json,
                plan.caller.headers,
                session_header=d.settings.sessions.header,
                authorization=plan.caller.authorization,
                default_max_tokens=d.settings.context.max_tokens_for(chat.model),
                unmarked=unmarked,
            )
            span.set("http.response.status_code", sent.answer.status)
        d.events.emit(UpstreamAnswered(sent.path, sent.answer.status, sent.seconds, plan.caller.request_id))
        return sent.answer

    async def _window_learned(self, plan: Plan, answer: Answer) -> bool:
        """Whether the upstream refused the prompt as too long, naming a smaller window than assumed."""
        body = await refusal(answer)
        if body is None:
            return False
        model = plan.chat.model
        window = self.deps.windows.learn(model, body)
        if window is None:  # a server-managed request compacts with its fallback on any such refusal
            too_long = refused_window(body) is not None or "maximum context length" in refusal_text(body).lower()
            return server_params(plan.strategy) is not None and too_long
        self.deps.events.emit(WindowLearned(model, window, self.deps.windows.configured(model), plan.caller.request_id))
        return True
