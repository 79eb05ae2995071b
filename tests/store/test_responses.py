"""The Responses door's stored state without I/O: a stored response's forms and its journal path."""

from __future__ import annotations

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
    assert StoredResponse.from_json(stored.to_json()) == stored
    assert b"earlier" not in stored.to_json()
    whole = b'{"session":"s","seq":1,"input":[{"role":"user","content":"one"},{"role":"user","content":"two"}],'
    old = StoredResponse.from_json(whole + b'"own":1,"output":{"role":"assistant","content":"re"},"response":{}}')
    assert (old.earlier, old.own, old.lead) == ([{"role": "user", "content": "one"}], own, [])
