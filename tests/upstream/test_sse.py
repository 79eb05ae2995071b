"""Incremental SSE parsing and stream assembly."""

from __future__ import annotations

import orjson

from proxy.upstream import SSEParser, StreamAssembler, is_usage_only, parse_chunk


def event(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def test_events_split_across_reads_and_batched_in_one() -> None:
    stream = event({"a": 1}) + b": keep-alive\n\n" + event({"b": 2}) + b"data: [DONE]\n\n"
    parser = SSEParser()
    events = []
    for i in range(0, len(stream), 7):
        events += parser.feed(stream[i : i + 7])
    assert [e.data for e in events] == [b'{"a":1}', None, b'{"b":2}', b"[DONE]"]
    assert b"".join(e.raw for e in events) == stream
    assert events[-1].done


def test_crlf_and_unterminated_final_event() -> None:
    parser = SSEParser()
    assert [e.data for e in parser.feed(b'data: {"x":1}\r\n\r\ndata: {"y"')] == [b'{"x":1}']
    assert [e.data for e in parser.feed(b":2}")] == []
    assert [e.data for e in parser.flush()] == [b'{"y":2}']


def test_assembler_builds_content_tool_calls_and_usage() -> None:
    a = StreamAssembler()
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a"'}}
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
    ]
    for chunk in chunks:
        a.add(chunk)
    assert a.message() == {
        "role": "assistant",
        "content": "Hello",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
    }
    assert a.usage == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    assert is_usage_only(chunks[-1]) and not is_usage_only(chunks[0])
    assert parse_chunk(b"not json") is None
