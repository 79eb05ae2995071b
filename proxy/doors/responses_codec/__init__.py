"""OpenAI's Responses and Conversations APIs over the Chat Completions core: pure translation.

`parse_request` turns a `POST /v1/responses` body into a `ResponsesCall`: the core request
(a Chat Completions body whose `messages` are the instructions, as a leading system message,
and the translated input) and the state fields the door glue resolves. The answer goes back
through `output_items`, `usage_of` and `response_object`, or, streamed, through
`ResponseStream`. The rest serves the retrieval endpoints: `input_items_of`, `item_list`,
`conversation_object`, `without_item`, `parse_conversation_create`, `parse_conversation_update`,
`parse_conversation_items`; and `POST /v1/responses/compact`: `parse_compact`,
`compaction_item`, `compacted_object`, and `restore` for compaction items sent back.

The core keeps messages only (`_input` says how each input item maps); no I/O here.
"""

from proxy.doors.responses_codec._checks import metadata as parse_metadata
from proxy.doors.responses_codec._compact import CompactCall, compacted_object, compaction_item, parse_compact, restore
from proxy.doors.responses_codec._lists import (
    MAX_ITEMS,
    conversation_object,
    item_list,
    parse_conversation_create,
    parse_conversation_items,
    parse_conversation_update,
)
from proxy.doors.responses_codec._output import (
    input_items_of,
    output_items,
    response_object,
    usage_of,
    without_item,
)
from proxy.doors.responses_codec._request import ResponsesCall, parse_request
from proxy.doors.responses_codec._stream import INCOMPLETE_REASONS, ResponseStream

__all__ = [
    "INCOMPLETE_REASONS",
    "MAX_ITEMS",
    "CompactCall",
    "ResponseStream",
    "ResponsesCall",
    "compacted_object",
    "compaction_item",
    "conversation_object",
    "input_items_of",
    "item_list",
    "output_items",
    "parse_compact",
    "parse_conversation_create",
    "parse_conversation_items",
    "parse_conversation_update",
    "parse_metadata",
    "parse_request",
    "response_object",
    "restore",
    "usage_of",
    "without_item",
]
