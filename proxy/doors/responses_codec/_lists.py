"""OpenAI's list shape and the Conversations API's bodies, for the glue's retrieval endpoints."""

from __future__ import annotations

from typing import Any

from proxy.doors.responses_codec._checks import array, invalid_type, metadata, missing, obj
from proxy.doors.responses_codec._input import parse_items
from proxy.errors import BadRequest
from proxy.types import JSONObject, Message

MAX_ITEMS = 20
"""`POST /v1/conversations` and `POST /v1/conversations/{id}/items` take at most this many items."""


def _limit(limit: object, param: str) -> int:
    """1..100, default 20; a query string's digits count as the number."""
    if limit is None:
        return 20
    value = int(limit) if isinstance(limit, str) and limit.strip().isdecimal() else limit
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise BadRequest(f"Invalid '{param}': expected an integer between 1 and 100, got {limit!r}.", param=param)
    return value


def item_list(
    items: list[JSONObject], *, limit: object, after: object, order: object, param_prefix: str = ""
) -> JSONObject:
    """One page of `items` (oldest first, as stored) in OpenAI's list shape. `order` is `desc` (newest
    first, the API's default) or `asc`; `after` is the id of the item the page starts after, in that order."""
    if order not in (None, "asc", "desc"):
        raise BadRequest(
            f"Invalid value for '{param_prefix}order': expected 'asc' or 'desc', got {order!r}.",
            param=f"{param_prefix}order",
        )
    ordered = items if order == "asc" else items[::-1]
    start = 0
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if not isinstance(after, str) or after not in ids:
            raise BadRequest(f"No item with id {after!r} to list after.", param=f"{param_prefix}after")
        start = ids.index(after) + 1
    count = _limit(limit, f"{param_prefix}limit")
    page = ordered[start : start + count]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": start + count < len(ordered),
    }


def conversation_object(conversation_id: str, *, created_at: int, metadata: JSONObject | None) -> JSONObject:
    return {"id": conversation_id, "object": "conversation", "created_at": created_at, "metadata": metadata or {}}


def _items(value: object, path: str) -> list[Message]:
    """Conversation items -> core messages (reasoning dropped; compaction items have no place here)."""
    messages, _ = parse_items(array(value, path, most=MAX_ITEMS), path)
    return messages


def parse_conversation_create(body: object) -> tuple[list[Message], JSONObject | None]:
    """`POST /v1/conversations` (a missing body is an empty one) -> (its items as core messages, metadata)."""
    if body is None:
        return [], None
    fields = obj(body, "", frozenset({"items", "metadata"}))
    items: Any = fields.get("items")
    return (_items(items, "items") if items is not None else []), metadata(fields.get("metadata"))


def parse_conversation_update(body: object) -> JSONObject:
    """`POST /v1/conversations/{id}`: `{"metadata": {...}}` (required) -> the new metadata."""
    fields = obj(body, "", frozenset({"metadata"}))
    if fields.get("metadata") is None:
        raise missing("metadata")
    return metadata(fields["metadata"]) or {}


def parse_conversation_items(body: object) -> list[Message]:
    """`POST /v1/conversations/{id}/items`: `{"items": [...]}`, at most 20, as core messages."""
    fields = obj(body, "", frozenset({"items"}))
    if fields.get("items") is None:
        raise missing("items")
    if not isinstance(fields["items"], list):
        raise invalid_type("items", "an array", fields["items"])
    return _items(fields["items"], "items")
