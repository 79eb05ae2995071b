"""The Responses codec's stream: core chat chunks -> Responses events, judged by the openai SDK's
own event models and its stream accumulator (the state behind `client.responses.stream`)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from proxy.doors.responses_codec import ResponsesCall, ResponseStream, output_items, parse_request, response_object
from tests.doors.test_responses_codec import ANSWER

RID = "resp_feed"
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def call_of(**fields: Any) -> ResponsesCall:
    return parse_request({"model": "gpt-4o-mini", "input": "hi", "stream": True, **fields})


def delta(**fields: Any) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def call_delta(index: int, arguments: str, **fields: Any) -> dict[str, Any]:
    return delta(
        tool_calls=[{"index": index, "function": {"arguments": arguments, **fields.pop("function", {})}, **fields}]
    )


USAGE_CHUNK = {
    "object": "chat.completion.chunk",
    "choices": [],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
}


def events_of(sse: bytes) -> list[dict[str, Any]]:
    """Each SSE block: its `event:` line names the data's type."""
    out = []
    for block in sse.decode().split("\n\n")[:-1]:
        event_line, data_line = block.split("\n")
        data = orjson.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {data['type']}"
        out.append(data)
    assert sse.endswith(b"\n\n")
    return out


def run(
    chunks: list[dict[str, Any]], *, finish: str | None = "stop", call: ResponsesCall | None = None
) -> tuple[ResponseStream, list[dict[str, Any]]]:
    stream = ResponseStream(call or call_of(), response_id=RID, created_at=1700000000)
    sse = stream.start() + b"".join(stream.feed(chunk) for chunk in chunks) + stream.complete(None, finish)
    return stream, events_of(sse)


def accumulated(events: list[dict[str, Any]]) -> Any:
    """Every event parsed by the SDK's models and fed to its accumulator; its final response."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for index, event in enumerate(events):
        assert event["sequence_number"] == index
        state.handle_event(EVENTS.validate_python(event))
    return state._completed_response


def test_a_streamed_answer_is_what_the_sdk_accumulates_and_what_a_plain_answer_gives() -> None:
    stream, events = run(
        [
            delta(role="assistant", reasoning_content="Look "),
            delta(reasoning_content="it up."),
            delta(content="It "),
            delta(content="rains."),
            call_delta(0, '{"city":', id="call_a", type="function", function={"name": "w"}),
            call_delta(0, '"Oslo"}'),
            call_delta(1, "{}", id="call_b", function={"name": "t"}),
            USAGE_CHUNK,
        ],
        finish="tool_calls",
    )
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]  # fmt: skip
    final = accumulated(events)
    assert final.output_text == "It rains." and final.usage.total_tokens == 8
    assert stream.response["output"] == output_items(ANSWER, response_id=RID)
    assert events[-1]["response"] == stream.response
    assert Response.model_validate(stream.response).status == "completed"
    text_delta = events[11]
    assert (text_delta["item_id"], text_delta["output_index"], text_delta["content_index"], text_delta["logprobs"]) == (
        "msg_feed_0",
        1,
        0,
        [],
    )


def test_created_and_in_progress_carry_the_response_in_progress() -> None:
    stream = ResponseStream(call_of(), response_id=RID, created_at=1)
    created, in_progress = events_of(stream.start())
    assert created["response"]["status"] == "in_progress" and created["response"]["output"] == []
    assert in_progress["type"] == "response.in_progress" and in_progress["sequence_number"] == 1


def test_length_ends_incomplete_with_max_output_tokens() -> None:
    stream, events = run([delta(content="Once upon")], finish="length")
    assert events[-1]["type"] == "response.incomplete"
    assert stream.response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert stream.response["status"] == "incomplete"
    accumulated(events)


def test_usage_given_at_the_end_wins_over_the_usage_chunk() -> None:
    stream = ResponseStream(call_of(), response_id=RID, created_at=1)
    stream.start()
    stream.feed(delta(content="x"))
    stream.feed(USAGE_CHUNK)
    stream.complete({"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}, "stop")
    assert stream.response["usage"]["input_tokens"] == 7


def test_a_refusal_streams_as_a_refusal_part() -> None:
    stream, events = run([delta(refusal="I can't"), delta(refusal=" help.")])
    types = [e["type"] for e in events]
    assert "response.refusal.delta" in types and "response.refusal.done" in types
    assert stream.response["output"] == output_items(
        {"role": "assistant", "content": None, "refusal": "I can't help."}, response_id=RID
    )
    accumulated(events)


def test_an_empty_answer_still_has_its_message() -> None:
    stream, events = run([delta(role="assistant"), USAGE_CHUNK])
    assert stream.response["output"] == output_items({"role": "assistant", "content": ""}, response_id=RID)
    assert accumulated(events).output_text == ""


def test_text_after_a_tool_call_opens_a_new_message() -> None:
    stream, events = run([call_delta(0, "{}", id="c", function={"name": "f"}), delta(content="done")])
    assert [(i["type"], i["id"]) for i in stream.response["output"]] == [
        ("function_call", "fc_feed_0"),
        ("message", "msg_feed_0"),
    ]
    accumulated(events)


def test_fail_ends_with_response_failed_only() -> None:
    stream = ResponseStream(call_of(), response_id=RID, created_at=1)
    sse = stream.start() + stream.feed(delta(content="partial")) + stream.fail("server_error", "upstream went away")
    events = events_of(sse)
    assert events[-1]["type"] == "response.failed"
    assert not any(e["type"].endswith(".done") or e["type"] == "response.completed" for e in events)
    failed = EVENTS.validate_python(events[-1])
    assert failed.response.error.code == "server_error" and failed.response.status == "failed"
    assert stream.response["output"][0]["status"] == "incomplete"
    for event in events:
        EVENTS.validate_python(event)


@pytest.mark.parametrize("end", ["feed", "complete", "fail"])
def test_an_ended_stream_takes_nothing_more(end: str) -> None:
    stream = ResponseStream(call_of(), response_id=RID, created_at=1)
    stream.start()
    stream.complete(None, "stop")
    with pytest.raises(RuntimeError):
        {"feed": lambda: stream.feed(delta(content="x")), "complete": lambda: stream.complete(None, None),
         "fail": lambda: stream.fail("server_error", "x")}[end]()  # fmt: skip


def test_the_stream_repeats_the_request_like_the_plain_response() -> None:
    call = call_of(instructions="Be brief.", metadata={"a": "b"}, tools=[{"type": "function", "name": "f"}])
    stream, _ = run([delta(content="ok")], call=call)
    plain = response_object(
        call,
        response_id=RID,
        created_at=1700000000,
        status="completed",
        output=output_items({"role": "assistant", "content": "ok"}, response_id=RID),
        usage=None,
    )
    assert stream.response == plain
