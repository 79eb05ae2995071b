"""The Responses door's stored state without I/O: a stored response's forms and its journal path."""

from __future__ import annotations

import orjson

from proxy.store import StoredTurn
from proxy.store.responses import StoredResponse, path_messages


def _turn(seq: int, parent: int, text: str, status: str = "completed") -> StoredTurn:
    record = {"status": status, "input": [{"role": "user", "content": text}]}
    if status == "completed":
        record["output"] = {"role": "assistant", "content": f"re {text}"}
    return StoredTurn(seq, parent, 0, record)


def test_the_path_follows_the_parents_and_skips_what_did_not_complete() -> None:
    turns = [_turn(0, -1, "root"), _turn(1, 0, "a"), _turn(2, 0, "failed", "failed"), _turn(3, 0, "b")]
    assert [m["content"] for m in path_messages(turns, 3) or []] == ["root", "re root", "b", "re b"]
    assert [m["content"] for m in path_messages(turns, 1) or []] == ["root", "re root", "a", "re a"]
    assert path_messages(turns[1:], 3) is None  # the root is gone


def test_a_stored_response_reads_back_in_either_form() -> None:
    own, output = [{"role": "user", "content": "two"}], {"role": "assistant", "content": "re two"}
    lead = [{"role": "developer", "content": "short"}]
    stored = StoredResponse("s", 3, own, output, {"id": "resp_1"}, lead)
    assert StoredResponse.unpack(stored.pack()) == stored
    unpacked = b'{"session":"s","seq":3,"own":[{"role":"user","content":"two"}],"output":{"role":"assistant","content":"re two"},'
    assert (
        StoredResponse.unpack(unpacked + b'"response":{"id":"resp_1"},"lead":[{"role":"developer","content":"short"}]}')
        == stored
    )
    whole = b'{"session":"s","seq":1,"input":[{"role":"user","content":"one"},{"role":"user","content":"two"}],'
    old = StoredResponse.unpack(whole + b'"own":1,"output":{"role":"assistant","content":"re"},"response":{}}')
    assert (old.earlier, old.own, old.lead) == ([{"role": "user", "content": "one"}], own, [])


def test_a_stored_response_is_deflated_and_an_agents_tools_most_of_all() -> None:
    """The Response object echoes the request's tools: an agent's 16 schemas are 27 KB of JSON."""
    output = {"role": "assistant", "content": "Item 7 is in stock; it was last moved on day 3 to shelf 10."}
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-4o-mini", "tools": []}
    plain = StoredResponse("s", 3, [{"role": "user", "content": "Where is item 7?"}], output, response)
    tools = [
        {"type": "function", "name": f"tool_{i}", "description": " ".join(f"reads part {j} of file {i * j}" for j in range(40)),
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": None}
        for i in range(16)
    ]  # fmt: skip
    agent = StoredResponse("s", 3, plain.own, output, {**response, "tools": tools})
    plain_json = len(orjson.dumps([plain.own, plain.output, plain.response]))
    assert plain.pack()[:1] == b"\x01" and len(plain.pack()) < 0.6 * plain_json
    assert agent.pack()[:1] == b"\x01" and len(agent.pack()) < 0.2 * len(orjson.dumps(tools))
    for stored in (plain, agent):
        assert StoredResponse.unpack(stored.pack()) == stored
