"""Journaling a turn exactly once, at the right moment, even when the request is cancelled.

A turn is recorded when its answer is complete but before the client sees the end of
it (the last SSE event, or the JSON body), so a client's next request always finds it.
A request that ends any other way (the client left, the upstream failed) is recorded
as it ended (a request cancelled while the proxy shuts down is `interrupted`, not
`canceled`). The write runs in a task the request cannot cancel (`PendingWrites`), and
shutdown waits for such writes before it closes the store. A completed answer's
`usage.prompt_tokens` is fed back: into the session (the next budget check) and into
the model's calibration. A derived session's completed turn is indexed by its output, so
that the client's next request finds the session (`derived.py`). A delta client's
completed turn extends this process's cached path, so that its next request loads
nothing but the head; a full-history client's does not, since it may ask again from the
turn before (a regenerated answer), which only the unextended path reaches cheaply.
"""

from __future__ import annotations

from proxy import tracing
from proxy.context.cost import turn_costs
from proxy.context.tokens import count_message
from proxy.context_tools.rounds import ToolRounds
from proxy.gateway import Admission, settle
from proxy.sessions import Turn, TurnDraft, message_hash
from proxy.turn.outcome import Outcome
from proxy.turn.plan import Plan, TurnDeps
from proxy.turn.savings import with_turn
from proxy.turn.status import cut_off
from proxy.types import JSONObject


class TurnRecorder:
    def __init__(
        self,
        deps: TurnDeps,
        plan: Plan,
        draft: TurnDraft,
        *,
        sent_tokens: int,
        rounds: ToolRounds | None = None,
        admission: Admission | None = None,
    ) -> None:
        conversation = plan.conversation
        self._store = deps.store
        self._writes = deps.writes
        self._tokens = deps.tokens
        self._keys = conversation.keys
        self._parent = conversation.reconciled.parent
        self._draft = draft
        self._sent_tokens = sent_tokens
        self._encoder = plan.encoder
        self._ttl_s = deps.settings.sessions.ttl_s
        self._derived = deps.derived if conversation.identity.derived else None
        self._paths = deps.paths
        self._keep = plan.caller.keep
        self._rounds = rounds
        self._admission = admission
        self._price = deps.settings.context.price_for(draft.model)
        self._shadow = plan.shadow
        """A shadow turn's usage measured the client's own prompt: it is not fed back."""
        self._recorded = False
        self.outcome: Outcome | None = None
        """The outcome the turn was journaled with, once it was."""
        self.seq: int | None = None
        """The turn's number in the journal, once it is written."""
        self.costs: tuple[float, float] | None = None
        """(cost as sent, cost saved) in US dollars, once recorded with a usage and a price."""

    async def record(self, outcome: Outcome) -> None:
        """Journal the turn with this outcome; later calls do nothing."""
        if self._recorded:
            return
        self._recorded = True
        self.outcome = outcome
        with tracing.span("record", status=outcome.status):
            await self._writes.run(self._write(outcome))

    async def _write(self, outcome: Outcome) -> None:
        draft, output = self._draft, outcome.output
        status = cut_off(stopping=self._writes.stopping) if outcome.status == "canceled" else outcome.status
        record = draft.record(
            status=status,  # type: ignore[arg-type]
            output=output,
            output_tokens=count_message(self._encoder, output) if output else 0,
            output_hash=message_hash(output) if output else None,
            usage=outcome.usage,
            error=outcome.error,
        )
        saved = self._count_savings(record, outcome.usage)
        usage = outcome.usage
        if self._rounds is not None:
            if self._rounds.rounds:
                record["rounds"] = self._rounds.rounds
            usage = self._rounds.first_usage  # the answer that measured the composed context
        if not self._keep:  # nothing of the turn is kept; its gateway reservation is settled all the same
            await settle(self._admission, outcome.status, outcome.usage, saved)
            return
        feedback = None
        prompt_tokens = (usage or {}).get("prompt_tokens")
        if outcome.status == "completed" and isinstance(prompt_tokens, int) and self._shadow is None:
            feedback = {"prompt": prompt_tokens, "local": self._sent_tokens, "window": draft.window}
            self._tokens.observe_usage(draft.model, reported=prompt_tokens, local=self._sent_tokens)
        self.seq, parent, _ = await self._store.append_turn(
            self._keys,
            record,
            parent=self._parent,
            completed=outcome.status == "completed",
            hashes=record["hashes"],
            ttl_s=self._ttl_s,
            usage=feedback,
        )
        if self._paths is not None and self._parent is None and outcome.status == "completed":
            self._paths.extend(self._keys, parent, Turn.from_record(self.seq, record))
        await settle(self._admission, outcome.status, outcome.usage, saved)
        if self._derived is not None and outcome.status == "completed" and record["hashes"]:
            keys = self._keys
            await self._derived.record(keys.tenant, record["hashes"][-1], keys.session, ttl_s=self._ttl_s)

    def _count_savings(self, record: JSONObject, usage: JSONObject | None) -> tuple[int, float]:
        """The turn's costs and its path's running totals, into `record`; returns what the
        gateway key's periods count as saved (tokens, US dollars: managed turns only)."""
        draft = self._draft
        composed = (self._shadow.composed_tokens if self._shadow else self._sent_tokens) or 0
        client = draft.client_tokens or 0
        counted = draft.client_tokens is not None and composed > 0
        if counted:
            self.costs = turn_costs(self._price, usage, client - composed)
        if self.costs is not None:
            record["cost_usd"], record["saved_cost_usd"] = self.costs
        if draft.path_savings is not None:  # an uncounted turn carries the totals on
            record["path_savings"] = (
                with_turn(draft.path_savings, client, composed, self.costs) if counted else draft.path_savings
            )
        if not counted or self._shadow is not None:
            return (0, 0.0)
        return (client - composed, self.costs[1] if self.costs else 0.0)
