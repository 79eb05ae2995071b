"""The Responses API's state beside the journal: stored Response objects, conversations, compactions.

A stored response holds what continuing it needs (the conversation it answered, as core
messages, and its answer) besides the Response object that retrieval shows; a conversation
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

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import orjson
from redis.exceptions import WatchError

from proxy.errors import Conflict
from proxy.store.connection import Client, mapped
from proxy.store.names import PREFIX
from proxy.store.redis_store import Store
from proxy.types import JSONObject, Message


def response_key(tenant: str, response_id: str) -> str:
    return f"{PREFIX}:resp:{tenant}:{response_id}"


def conversation_key(tenant: str, conversation_id: str) -> str:
    return f"{PREFIX}:conv:{tenant}:{conversation_id}"


def compaction_key(tenant: str, reference: str) -> str:
    return f"{PREFIX}:cmp:{tenant}:{reference}"


@dataclass(frozen=True)
class StoredCompaction:
    summary: Message
    """The message that stands in for the compacted span (restored in the item's place)."""
    archive: list[Message]
    """The span it replaced, verbatim."""
    model: str
    created_at: int


@dataclass(frozen=True)
class StoredResponse:
    session: str
    seq: int | None
    """The response's turn in the session's journal."""
    input: list[Message]
    """The conversation the response answered (earlier turns, then the request's own input),
    without the request's instructions."""
    own: int
    """Where the request's own input starts in `input`."""
    output: Message
    """The answer, as the journal recorded it."""
    response: JSONObject

    @property
    def conversation(self) -> list[Message]:
        """What a response that continues this one starts from."""
        return [*self.input, self.output]


@dataclass(frozen=True)
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


def _client(store: Store) -> Client:
    """The store's connection pool (as `GatewayStore` shares it)."""
    return store._redis


class ResponseStore:
    """Typed calls over the Responses API's keys; shares the session store's connection pool."""

    def __init__(self, store: Store, *, ttl_s: int) -> None:
        self._redis = _client(store)
        self._execute = store.execute
        self._ttl_s = ttl_s

    async def save_response(self, tenant: str, response_id: str, stored: StoredResponse) -> None:
        with mapped():
            await self._execute("SET", response_key(tenant, response_id), orjson.dumps(stored), "EX", self._ttl_s)

    async def response(self, tenant: str, response_id: str) -> StoredResponse | None:
        """The stored response (None when it is unknown to this tenant, or deleted)."""
        with mapped():
            raw = await self._execute("GET", response_key(tenant, response_id))
        return StoredResponse(**orjson.loads(raw)) if raw is not None else None

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        """False when there was none to delete (the responses that continue it keep their own copy
        of the conversation, so they still work)."""
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
