"""`POST /v1/responses/compact`: its request, the compaction item and the compacted object.

A compaction item stands for a summary the proxy made and keeps. Its `encrypted_content` is
an opaque reference (the glue keeps the summary under it, per tenant), never the summary
itself: only the tenant that made it can have it restored, and an item the proxy did not
make restores nothing.
"""

from __future__ import annotations

from proxy.doors.responses_codec._checks import obj, string
from proxy.doors.responses_codec._input import parse_input
from proxy.doors.responses_codec._output import input_items_of
from proxy.doors.responses_codec._request import check_cache_options, passed_fields
from proxy.errors import BadRequest
from proxy.types import JSONObject, Message, frozen

_COMPACT_KEYS = frozenset(
    {
        "model", "input", "previous_response_id", "instructions", "prompt_cache_key", "prompt_cache_retention",
        "prompt_cache_options", "service_tier",
    }
)  # fmt: skip
CREATED_BY = "context-proxy"
"""The `created_by` of the compaction items the proxy makes."""


@frozen
class CompactCall:
    """A `POST /v1/responses/compact` request, validated."""

    model: str
    messages: list[Message]
    """The instructions (as a leading system message), then the input, as core messages."""
    instructions: str | None
    previous_response_id: str | None
    compactions: tuple[tuple[int, str], ...]
    """(position in `messages`, encrypted_content) of each compaction item of the input."""
    prompt_cache_key: str | None


def parse_compact(body: object) -> CompactCall:
    """Validate a compact request (OpenAI's fields: `model`, `input`, `previous_response_id`,
    `instructions` and the cache and tier options, checked and not acted on)."""
    fields = obj(body, "", _COMPACT_KEYS)
    model = string(fields, "model", "", required=True)
    if not model:
        raise BadRequest("Invalid 'model': empty string.", param="model", code="invalid_value")
    check_cache_options(fields)
    passed = passed_fields(fields)
    instructions = string(fields, "instructions", "")
    messages: list[Message] = [{"role": "system", "content": instructions}] if instructions is not None else []
    messages, compactions = parse_input(fields.get("input"), messages)
    return CompactCall(
        model=model,
        messages=messages,
        instructions=instructions,
        previous_response_id=string(fields, "previous_response_id", ""),
        compactions=tuple(compactions),
        prompt_cache_key=passed.get("prompt_cache_key"),
    )


def compaction_item(item_id: str, encrypted_content: str) -> JSONObject:
    return {"type": "compaction", "id": item_id, "encrypted_content": encrypted_content, "created_by": CREATED_BY}


def compacted_object(
    compacted_id: str,
    *,
    created_at: int,
    before: list[Message],
    compaction: JSONObject | None,
    after: list[Message],
    usage: JSONObject,
) -> JSONObject:
    """The `response.compaction` object: the items of `before`, the compaction item (when the
    strategy summarized), then the items of `after`, ids derived from `compacted_id`."""
    output = input_items_of([*before, *after], response_id=compacted_id)
    if compaction is not None:
        output.insert(len(input_items_of(before, response_id=compacted_id)), compaction)
    return {
        "id": compacted_id,
        "object": "response.compaction",
        "created_at": created_at,
        "output": output,
        "usage": usage,
    }


def restore(
    messages: list[Message], compactions: tuple[tuple[int, str], ...], summaries: list[Message]
) -> list[Message]:
    """`messages` with each compaction's summary (`summaries`, in the order of `compactions`) in its place."""
    restored = list(messages)
    for (position, _), summary in reversed(list(zip(compactions, summaries, strict=True))):
        restored.insert(position, summary)  # the latest first, so earlier positions still hold
    return restored
