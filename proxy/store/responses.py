"""The Responses API's state beside the journal: stored Response objects, conversations, compactions.

A stored response holds the Response object that retrieval shows and what continuing it needs:
its turn in the session's journal (which holds the conversation it answered), the request's
own input and its answer, so a chain of responses costs the journal's memory and a little more,
not a copy of the conversation per response. What a continuation starts from is the path to that
turn (`continued`); this process remembers it for the responses it stored lately, so a chain
served here reads only the stored response and whether its session still exists. A response
stored by an earlier version holds its whole conversation and is continued from that. A conversation
holds its metadata and its messages, each with the number its items' ids are made from; a compaction
(made by `POST /v1/responses/compact`) holds the summary its item stands for and the span it
replaced. Each is one JSON string under the caller's tenant, expiring with the sessions
(`sessions.ttl_s`):

- `cp:resp:<tenant>:<response id>`
- `cp:conv:<tenant>:<conversation id>`
- `cp:cmp:<tenant>:<encrypted_content>` (a random reference: another tenant's lookup finds nothing)

Every call is one command on one key, so no hash tag is needed on a cluster; a conversation
is changed under WATCH on its key (`update_conversation`), so concurrent changes all land.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import field, replace

import orjson
from redis.exceptions import WatchError

from proxy.errors import Conflict
from proxy.store.connection import Client, mapped
from proxy.store.names import PREFIX, SessionKeys
from proxy.store.records import Deflate
from proxy.store.redis_store import Store, StoredTurn
from proxy.types import JSONObject, Message, frozen


def response_key(tenant: str, response_id: str) -> str:
    return f"{PREFIX}:resp:{tenant}:{response_id}"


def conversation_key(tenant: str, conversation_id: str) -> str:
    return f"{PREFIX}:conv:{tenant}:{conversation_id}"


def compaction_key(tenant: str, reference: str) -> str:
    return f"{PREFIX}:cmp:{tenant}:{reference}"


_DICTIONARY = (
    b'"incomplete_details":{"reason":"max_output_tokens"},"refusal","function_call","call_id":"call_",'
    b'"arguments":"{\\"","reasoning","summary":[],"encrypted_content":"input_text","output_text",'
    b'"required":[],"additionalProperties":false},"strict":true},{"type":"function","name":"",'
    b'"description":"The ","parameters":{"type":"object","properties":{"":{"type":"string","description":"",'
    b'{"session":"auto-","seq":,"own":[{"role":"user","content":""}],"output":{"role":"assistant","content":""},'
    b'"response":{"id":"resp_","object":"response","created_at":179,"status":"completed","error":null,'
    b'"incomplete_details":null,"model":"gpt-4o-mini","output":[{"type":"message","id":"msg_","status":"completed",'
    b'"role":"assistant","content":[{"type":"output_text","text":"","annotations":[],"logprobs":[]}]}],'
    b'"usage":{"input_tokens":,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":,'
    b'"output_tokens_details":{"reasoning_tokens":0},"total_tokens":},"instructions":null,"tools":[],'
    b'"tool_choice":"auto","parallel_tool_calls":true,"temperature":null,"top_p":null,"max_output_tokens":null,'
    b'"max_tool_calls":null,"top_logprobs":null,"metadata":{},"text":{"format":{"type":"text"}},'
    b'"reasoning":{"effort":null,"summary":null},"truncation":"auto","store":true,"background":false,'
    b'"previous_response_id":"resp_","conversation":null,"user":null,"safety_identifier":null,'
    b'"prompt_cache_key":null,"prompt_cache_retention":null,"service_tier":null},"lead":[{"role":"developer","content":""}]}'
)
"""Nearest the data last: a stored response as `pack` orders it, and before that the parts of
tool definitions and of tool-calling and reasoning output. It must never change: stored responses
deflated with it are read with it (a new dictionary needs a new tag)."""
_PACKING = Deflate(_DICTIONARY, level=1, window_bits=15, mem_level=4)
"""Up to the whole window, since the tools a Response echoes (an agent's can be 30 KB) repeat far
apart (a plain response goes through a 4 KB one, cheaper to copy: `Deflate`), and a small hash
table: 9 us a plain response (1.4 KB of JSON to 0.24 KB), 43 us one with 16 tool schemas (28 KB
to 3.3 KB)."""


@frozen
class StoredCompaction:
    summary: Message
    """The message that stands in for the compacted span (restored in the item's place)."""
    archive: list[Message]
    """The span it replaced, verbatim."""
    model: str
    created_at: int


@frozen
class StoredResponse:
    session: str
    seq: int | None
    """The response's turn in the session's journal."""
    own: list[Message]
    """The request's own input (less any repeat of the conversation it continued)."""
    output: Message
    """The answer, as the journal recorded it."""
    response: JSONObject
    lead: list[Message] = field(default_factory=list)
    """The conversation's leading system/developer items, which the journal keeps apart from
    its turns' input (not the request's `instructions`: those are never carried over)."""
    earlier: list[Message] | None = None
    """The conversation before `own`, verbatim, when the journal cannot give it: a response
    stored by an earlier version, or one whose turn has no number."""

    def pack(self) -> bytes:
        data: JSONObject = {
            "session": self.session, "seq": self.seq, "own": self.own, "output": self.output, "response": self.response,
        }  # fmt: skip
        if self.lead:
            data["lead"] = self.lead
        if self.earlier is not None:
            data["earlier"] = self.earlier
        return _PACKING.pack(orjson.dumps(data))

    @classmethod
    def unpack(cls, raw: bytes) -> StoredResponse:
        """A stored response in any form: deflated, or JSON (as earlier versions wrote it)."""
        data = orjson.loads(_PACKING.unpack(raw))
        if "input" in data:  # stored whole by an earlier version: `own` is where its own input starts
            conversation, own = data["input"], data["own"]
            return cls(data["session"], data["seq"], conversation[own:], data["output"], data["response"],
                       earlier=conversation[:own])  # fmt: skip
        return cls(**data)


def path_messages(turns: list[StoredTurn], seq: int) -> list[Message] | None:
    """The messages of the journal's path through turn `seq`, oldest first (each completed turn's
    input and output, as `Turn.messages`); None when a turn of the path is not among `turns`."""
    by_seq = {turn.seq: turn for turn in turns}
    path = []
    while seq >= 0:
        turn = by_seq.get(seq)
        if turn is None:
            return None
        path.append(turn.record)
        seq = turn.parent
    messages: list[Message] = []
    for record in reversed(path):
        if record.get("status", "completed") == "completed":
            messages += record.get("input") or ()
            if record.get("output"):
                messages.append(record["output"])
    return messages


class _Remembered:
    """The conversations that continuing this process's latest stored responses starts from,
    least recently used out past `max_messages` messages in all (their message objects are
    shared with the requests and the path cache, so an entry costs a list of references)."""

    def __init__(self, max_messages: int) -> None:
        self._entries: OrderedDict[tuple[str, str], list[Message]] = OrderedDict()
        self._total = 0
        self._max = max_messages

    def get(self, key: tuple[str, str]) -> list[Message] | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: tuple[str, str], conversation: list[Message]) -> None:
        if len(conversation) > self._max or key in self._entries:
            return
        self._entries[key] = conversation
        self._total += len(conversation)
        while self._total > self._max:
            _, oldest = self._entries.popitem(last=False)
            self._total -= len(oldest)


@frozen
class StoredConversation:
    created_at: int
    metadata: JSONObject
    messages: list[Message] = field(default_factory=list)
    """The conversation, oldest first, as core messages: items added to it, and each response's
    input and output; what the next response made in it continues."""
    numbers: list[int] = field(default_factory=list)
    """Each message's number, never reused (its items' ids are made from it, so they stay
    the same when an earlier item is deleted)."""
    next_number: int = 0

    def extended(self, added: list[Message]) -> StoredConversation:
        """The conversation with `added` after its messages, numbered on."""
        numbers = list(range(self.next_number, self.next_number + len(added)))
        return replace(
            self,
            messages=[*self.messages, *added],
            numbers=[*self.numbers, *numbers],
            next_number=self.next_number + len(added),
        )


_UPDATE_TRIES = 20
_REMEMBERED_MESSAGES = 50_000


def _client(store: Store) -> Client:
    """The store's connection pool (as `GatewayStore` shares it)."""
    return store._redis


class ResponseStore:
    """Typed calls over the Responses API's keys; shares the session store's connection pool."""

    def __init__(self, store: Store, *, ttl_s: int, remembered_messages: int = _REMEMBERED_MESSAGES) -> None:
        self._store = store
        self._redis = _client(store)
        self._execute = store.execute
        self._ttl_s = ttl_s
        self._remembered = _Remembered(remembered_messages)

    async def save_response(
        self, tenant: str, response_id: str, stored: StoredResponse, conversation: list[Message]
    ) -> None:
        """Store `stored`; `conversation` (what continuing it starts from) is remembered here."""
        with mapped():
            await self._execute("SET", response_key(tenant, response_id), stored.pack(), "EX", self._ttl_s)
        self._remembered.put((tenant, response_id), conversation)

    async def response(self, tenant: str, response_id: str) -> StoredResponse | None:
        """The stored response (None when it is unknown to this tenant, or deleted)."""
        with mapped():
            raw = await self._execute("GET", response_key(tenant, response_id))
        return StoredResponse.unpack(raw) if raw is not None else None

    async def continued(
        self, tenant: str, response_id: str, stored: StoredResponse, *, output_hash: str
    ) -> list[Message] | None:
        """What a response continuing `stored` (whose answer hashes to `output_hash`) starts from:
        the conversation it answered, then its answer. None when the journal no longer holds its
        turn (its session was deleted, or expired, or deleted and started again under its id).

        A remembered conversation is used when the session's latest turn with that answer is
        still the response's (one `HGET`); else, or when a later turn gave the same answer, the
        journal's path to the turn is read and checked."""
        if stored.earlier is not None:
            return [*stored.earlier, *stored.own, stored.output]
        keys = SessionKeys(tenant, stored.session)
        remembered = self._remembered.get((tenant, response_id))
        if remembered is not None and await self._store.turn_ending_with(keys, output_hash) == stored.seq:
            return remembered
        dump = await self._store.read_session(keys)
        path = path_messages(dump.turns, stored.seq) if dump is not None and stored.seq is not None else None
        if not path or path[-1] != stored.output:
            return None
        conversation = [*stored.lead, *path]
        self._remembered.put((tenant, response_id), conversation)
        return conversation

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        """False when there was none to delete (the responses that continue it still work: their
        conversation is the journal's)."""
        with mapped():
            return bool(await self._redis.delete(response_key(tenant, response_id)))

    async def save_conversation(self, tenant: str, conversation_id: str, conversation: StoredConversation) -> None:
        with mapped():
            await self._redis.set(conversation_key(tenant, conversation_id), orjson.dumps(conversation), ex=self._ttl_s)

    async def update_conversation(
        self, tenant: str, conversation_id: str, change: Callable[[StoredConversation], StoredConversation]
    ) -> StoredConversation | None:
        """`change` applied to the stored conversation atomically (WATCH/MULTI, tried again when
        another request changed it meanwhile, so concurrent responses and item edits all land);
        None when there is no such conversation."""
        key = conversation_key(tenant, conversation_id)
        for _ in range(_UPDATE_TRIES):
            with mapped():
                async with self._redis.pipeline(transaction=True) as pipe:
                    try:
                        await pipe.watch(key)
                        raw = await pipe.get(key)
                        if raw is None:
                            return None
                        changed = change(StoredConversation(**orjson.loads(raw)))
                        pipe.multi()  # type: ignore[no-untyped-call]
                        pipe.set(key, orjson.dumps(changed), ex=self._ttl_s)
                        await pipe.execute()
                        return changed
                    except WatchError:
                        continue
        raise Conflict(f"conversation {conversation_id!r} kept changing; try again")

    async def conversation(self, tenant: str, conversation_id: str) -> StoredConversation | None:
        with mapped():
            raw = await self._redis.get(conversation_key(tenant, conversation_id))
        return StoredConversation(**orjson.loads(raw)) if raw is not None else None

    async def delete_conversation(self, tenant: str, conversation_id: str) -> bool:
        with mapped():
            return bool(await self._redis.delete(conversation_key(tenant, conversation_id)))

    async def save_compaction(self, tenant: str, reference: str, compaction: StoredCompaction) -> None:
        with mapped():
            await self._execute("SET", compaction_key(tenant, reference), orjson.dumps(compaction), "EX", self._ttl_s)

    async def compaction(self, tenant: str, reference: str) -> StoredCompaction | None:
        """The compaction `reference` names for this tenant (None: unknown, expired, or another tenant's)."""
        with mapped():
            raw = await self._execute("GET", compaction_key(tenant, reference))
        return StoredCompaction(**orjson.loads(raw)) if raw is not None else None
