"""Content identity: what counts as the same message."""

from __future__ import annotations

import hashlib

import pytest

from proxy.sessions import chain_hashes, digest, message_hash, wire
from proxy.sessions import messages as messages_module
from proxy.types import Message


def test_response_only_fields_and_pinned_do_not_change_identity() -> None:
    sent = {"role": "assistant", "content": "hi"}
    returned = {"role": "assistant", "content": "hi", "refusal": None, "annotations": [], "pinned": True}
    assert message_hash(sent) == message_hash(returned)


def test_text_parts_equal_plain_text_and_null_equals_empty() -> None:
    assert message_hash(
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ) == message_hash({"role": "user", "content": "ab"})
    assert message_hash({"role": "assistant", "content": None, "tool_calls": []}) == message_hash(
        {"role": "assistant", "content": ""}
    )


def test_content_role_and_tool_calls_matter() -> None:
    base = {"role": "user", "content": "a"}
    assert message_hash(base) != message_hash({"role": "user", "content": "b"})
    assert message_hash(base) != message_hash({"role": "assistant", "content": "a"})
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    other = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    assert message_hash({"role": "assistant", "tool_calls": [call]}) != message_hash(
        {"role": "assistant", "tool_calls": [other]}
    )


def test_chain_matches_the_lua_definition() -> None:
    digests = ["aa", "bb"]
    first = hashlib.sha1(b"aa").hexdigest()
    assert chain_hashes(digests) == [first, hashlib.sha1((first + "bb").encode()).hexdigest()]


def test_wire_strips_only_the_marker() -> None:
    assert wire({"role": "user", "content": "x", "pinned": True}) == {"role": "user", "content": "x"}


def test_digest_reuses_the_shared_prefix_and_matches_a_fresh_digest() -> None:
    first = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
    ]
    second = [*first, {"role": "user", "content": "c"}]
    edited = [first[0], {"role": "user", "content": "A"}, *second[2:]]
    longer_last = [*first[:2], {"role": "assistant", "content": "bc"}]  # same bytes up to `b`, then more
    previous = digest(first)
    copied = [dict(m) for m in second]  # parsed again: equal messages, other objects
    for messages in (second, edited, longer_last, first[:1], first[:2], [], copied):
        reused, fresh = digest(messages, previous), digest(messages)
        assert (reused.hashes, reused.chain) == (fresh.hashes, fresh.chain)
        after = [*messages, {"role": "user", "content": "next"}]
        assert digest(after, reused).chain == digest(after).chain


def test_digest_hashes_only_what_follows_the_resent_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    first = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    previous = digest(first)
    hashed: list[Message] = []
    real = messages_module.message_hash
    monkeypatch.setattr(messages_module, "message_hash", lambda m: hashed.append(m) or real(m))
    digest([*first, {"role": "user", "content": "c"}], previous)
    assert hashed == [{"role": "user", "content": "c"}]
    hashed.clear()
    digest([first[0], {"role": "assistant", "content": "b, again"}], previous)  # the last one asked again
    assert hashed == [{"role": "assistant", "content": "b, again"}]
    hashed.clear()
    parsed_again = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    after_identity = digest([*first, {"role": "user", "content": "c"}], previous)
    hashed.clear()
    digest(parsed_again, after_identity)  # recognised by its bytes, after a turn recognised by identity
    assert hashed == []


def test_tool_calls_are_the_same_whatever_the_formatting_of_their_arguments() -> None:
    def call(arguments: str) -> dict[str, object]:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}]}  # fmt: skip

    written = message_hash(call('{"q": 1, "opts": {"deep": true, "n": [1, 2]}}'))
    assert message_hash(call('{"q":1,"opts":{"deep":true,"n":[1,2]}}')) == written, "compact (pydantic-ai)"
    assert message_hash(call('{"opts": {"n": [1, 2], "deep": true}, "q": 1}')) == written, "keys reordered"
    assert message_hash(call('{\n  "q": 1,\n  "opts": {"deep": true, "n": [1, 2]}\n}')) == written, "indented"
    assert message_hash(call('{"q": 2, "opts": {"deep": true, "n": [1, 2]}}')) != written, "another value"
    assert message_hash(call('{"q": 1, "opts": {"deep": true, "n": [2, 1]}}')) != written, "list order counts"
    assert message_hash(call("not json {")) == message_hash(call("not json {")) != message_hash(call("not json"))
