"""A turn whose request went upstream: relay the answer, record it, start background work.

The answer is relayed to the client as it comes; the turn is journaled before the
client sees its end (`recorder.py`), and a deferred compaction starts once it is done.
"""

from __future__ import annotations

import logging

from aiohttp import web

from proxy.compaction import Fitted
from proxy.context.budget import Budget
from proxy.gateway import Admission
from proxy.sessions import TurnDraft
from proxy.turn.background import background_job
from proxy.turn.facts import TurnFacts, fitting
from proxy.turn.plan import Plan, TurnDeps
from proxy.turn.recorder import TurnRecorder
from proxy.turn.relay import Outcome, StreamRelay, relay_json
from proxy.turn.rounds import ToolRounds
from proxy.upstream import Answer

log = logging.getLogger("context_proxy.turn")

STRATEGY_HEADER = "X-Context-Strategy"


class ActiveTurn:
    """A turn whose request went upstream: relay the answer, record it, start background work."""

    def __init__(
        self, deps: TurnDeps, plan: Plan, fitted: Fitted, budget: Budget, answer: Answer, extra_tokens: int = 0,
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
            paths=d.paths,
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
