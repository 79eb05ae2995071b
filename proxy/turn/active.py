"""A turn whose request went upstream: its answer, its record, its background work.

The HTTP edge relays `answer` to the client through its door (`proxy/handlers/relay.py`),
calls `record` with how it ended before the client sees its end (`recorder.py`), and
`finished` once it is done, which starts a deferred compaction.
"""

from __future__ import annotations

import logging

from proxy.compaction import Fitted
from proxy.context.budget import Budget
from proxy.context_tools.rounds import ToolRounds
from proxy.gateway import Admission
from proxy.sessions import TurnDraft
from proxy.turn.background import background_job
from proxy.turn.facts import TurnFacts, fitting
from proxy.turn.outcome import Outcome
from proxy.turn.plan import Plan, TurnDeps
from proxy.turn.recorder import TurnRecorder
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
        self._rounds = rounds
        composed = fitted.tokens + sum(plan.new_tokens) + plan.overhead + extra_tokens
        self.sent_tokens = plan.client.tokens if plan.shadow else composed
        """The prompt tokens sent upstream, by the proxy's count (a shadow turn's: the client's own)."""
        self.window_id = fitted.history.window.current
        self.answer = answer
        self._recorder = turn_recorder(
            deps, plan, window_id=self.window_id, sent_tokens=self.sent_tokens, rounds=rounds, admission=admission
        )

    def response_headers(self) -> dict[str, str]:
        """The proxy's headers on the answer (no session for a turn that keeps nothing)."""
        headers = {
            "X-Session-Id": self._plan.conversation.identity.session,
            "X-Context-Window-Id": self.window_id,
            "X-Context-Tokens": str(self.sent_tokens),
            STRATEGY_HEADER: self._plan.strategy.name,
            "X-Request-Id": self._plan.caller.request_id,
        }
        if not self._plan.caller.keep:
            del headers["X-Session-Id"]
        return headers

    @property
    def stream(self) -> bool:
        return self._plan.chat.stream

    @property
    def session(self) -> str:
        return self._plan.conversation.identity.session

    @property
    def seq(self) -> int | None:
        """The turn's number in the session's journal, once it is recorded."""
        return self._recorder.seq

    async def record(self, outcome: Outcome) -> None:
        """Journal the turn as it ended; later calls do nothing."""
        await self._recorder.record(outcome)

    def finished(self) -> None:
        """The answer is relayed: log it, and start the compaction it deferred."""
        self._log()
        if self._fitted.what == "deferred":
            self._start_background()

    def facts(self) -> TurnFacts:
        """What this turn was, for the access log, the metrics and the trace."""
        plan, outcome = self._plan, self._recorder.outcome
        prompt, completion = TurnFacts.usage_of(outcome.usage if outcome else None)
        return TurnFacts(
            session=plan.conversation.identity.session,
            tenant=plan.caller.tenant,
            window=self.window_id,
            strategy=plan.strategy.name,
            status=outcome.status if outcome else "canceled",
            sent_tokens=self.sent_tokens,
            client_tokens=plan.client.tokens,
            mode="shadow" if plan.shadow else "managed",
            composed_tokens=plan.shadow.composed_tokens if plan.shadow else self.sent_tokens,
            costs=self._recorder.costs,
            prompt_tokens=prompt,
            completion_tokens=completion,
            compaction=fitting(self._fitted),
            upstream_s=self.answer.seconds,
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
            fitted.result.strategy if fitted.result else fitted.reason or fitted.what,
        )  # fmt: skip


def turn_recorder(
    deps: TurnDeps,
    plan: Plan,
    *,
    window_id: str,
    sent_tokens: int,
    rounds: ToolRounds | None = None,
    admission: Admission | None = None,
) -> TurnRecorder:
    """The recorder of `plan`'s turn: its new input, answered in `window_id` with `sent_tokens`
    (also for a turn that failed before it went upstream: nothing sent, window as loaded)."""
    reconciled = plan.conversation.reconciled
    draft = TurnDraft(
        model=plan.chat.model,
        input=reconciled.new_input,
        input_tokens=plan.new_tokens,
        input_hashes=reconciled.new_hashes,
        encoding=plan.encoder.name,
        request_id=plan.caller.request_id,
        window=window_id,
        stream=plan.chat.stream,
        context_tokens=sent_tokens,
        path_tokens=None if plan.client.path_before is None else plan.client.path_before + sum(plan.new_tokens),
        client_tokens=plan.client.tokens,
        shadow=plan.shadow.to_json() if plan.shadow else None,
        path_savings=plan.client.savings_before,
        system=plan.system[0] if plan.system else None,
        system_tokens=plan.system[1] if plan.system else [],
        door=plan.caller.door,
        door_id=plan.caller.door_id,
    )
    return TurnRecorder(deps, plan, draft, sent_tokens=sent_tokens, rounds=rounds, admission=admission)
