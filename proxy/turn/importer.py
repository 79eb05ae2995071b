"""Journal the earlier exchanges a request carries as imported turns, before it is fitted.

A conversation that arrives long (see `proxy/sessions/imported.py`) would otherwise be
one turn's new input, which no cut can split: a first request of 30 exchanges to a small
window could only be refused. Its earlier complete exchanges are appended to the journal
as `imported` turns on the request's path (each a completed turn: only completed turns
reach a later context, and these are the conversation's past), and the conversation is
extended by them, so the strategy compacts them like any history and only the request's
own turn is new input. The turns are written one by one, each atomically, shielded from
the client leaving; a journal left with only some of them is a shorter past, and the
client's next request imports the rest. A turn that keeps nothing (`Caller.keep`) gets them
as history all the same, numbered as the journal would number them, and writes none.
"""

from __future__ import annotations

from dataclasses import replace

from proxy.context.compose import extend_history
from proxy.context.tokens import Encoder
from proxy.sessions import Turn, TurnDraft
from proxy.sessions.imported import Exchange, earlier_exchanges
from proxy.turn.conversation import Conversation
from proxy.turn.plan import TurnDeps
from proxy.turn.savings import path_through, savings_through
from proxy.types import JSONObject


async def import_exchanges(
    deps: TurnDeps, conversation: Conversation, encoder: Encoder, *, request_id: str, keep: bool = True
) -> Conversation:
    """`conversation` with the earlier exchanges of its new input journaled and in its history
    (unchanged when its new input is the request's own turn only)."""
    reconciled = conversation.reconciled
    exchanges = earlier_exchanges(reconciled.new_input)
    if not exchanges:
        return conversation
    tokens = await deps.tokens.count_messages(encoder, reconciled.new_input[: exchanges[-1].end + 1])
    base = path_through(conversation.history, reconciled.parent, from_root=reconciled.from_root)
    savings = savings_through(conversation.history, reconciled.parent, from_root=reconciled.from_root)
    records = [
        _record(
            conversation,
            exchange,
            tokens,
            encoder,
            request_id,
            (None if base is None else base + sum(tokens[: exchange.end]), savings),
        )
        for exchange in exchanges
    ]
    turns: list[Turn] = []

    async def write() -> None:
        parent = reconciled.parent
        for record in records:
            seq, _, _ = await deps.store.append_turn(
                conversation.keys, record, parent=parent, completed=True, hashes=record["hashes"],
                ttl_s=deps.settings.sessions.ttl_s, usage=None,
            )  # fmt: skip
            turns.append(Turn.from_record(seq, record))
            parent = seq

    if keep:
        await deps.writes.run(write())
    else:
        turns = [Turn.from_record(seq, record) for seq, record in enumerate(records)]
    own = exchanges[-1].end + 1
    return replace(
        conversation,
        history=extend_history(conversation.history, turns),
        reconciled=replace(
            reconciled,
            new_input=reconciled.new_input[own:],
            new_hashes=reconciled.new_hashes[own:],
            parent=turns[-1].seq,
            from_root=False,
        ),
    )


def _record(
    conversation: Conversation,
    exchange: Exchange,
    tokens: list[int],
    encoder: Encoder,
    request_id: str,
    path: tuple[int | None, JSONObject | None],
) -> JSONObject:
    """An imported turn's record; `path`: its path's tokens through its input, and the path's
    savings totals (an imported turn counts nothing, it carries them on)."""
    messages, hashes = conversation.reconciled.new_input, conversation.reconciled.new_hashes
    start, end = exchange.start, exchange.end
    draft = TurnDraft(
        model="",
        input=messages[start:end],
        input_tokens=tokens[start:end],
        input_hashes=hashes[start:end],
        encoding=encoder.name,
        request_id=request_id,
        window=conversation.stored_window.current,
        stream=False,
        context_tokens=0,
        imported=True,
        path_tokens=path[0],
        path_savings=path[1],
    )
    return draft.record(
        status="completed", output=messages[end], output_tokens=tokens[end], output_hash=hashes[end], usage=None,
        error=None,
    )  # fmt: skip
