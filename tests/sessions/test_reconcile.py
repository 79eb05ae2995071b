"""Reconcile rules as pure functions: full-history, delta, divergence, derived sessions."""

from __future__ import annotations

from proxy.sessions import chain_hashes, message_hash, needs_full_query, prefix_query, reconcile
from proxy.sessions.reconcile import RECENT_PREFIXES
from proxy.store import LoadedSession

SYS = {"role": "system", "content": "rules"}


def loaded(*, head: int = -1, parent: int = -1, matched: int = 0, found: bool = False) -> LoadedSession:
    return LoadedSession(head, parent, matched, found, True, None, None, "0", "win_0", False, [])


def hashes(messages: list[dict[str, str]]) -> list[str]:
    return [message_hash(m) for m in messages]


def test_full_history_request_adds_only_what_follows_the_match() -> None:
    msgs = [
        SYS,
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    result = reconcile(
        msgs, hashes(msgs), loaded(head=0, parent=0, matched=3, found=True), derived=False, session_leading=[]
    )
    assert result.new_input == [msgs[3]] and result.parent == 0 and not result.branched


def test_full_history_match_off_the_head_is_a_branch() -> None:
    msgs = [
        SYS,
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "edited"},
    ]
    result = reconcile(
        msgs, hashes(msgs), loaded(head=5, parent=0, matched=3, found=True), derived=False, session_leading=[]
    )
    assert result.branched and result.parent == 0 and result.new_input == [msgs[3]]


def test_match_inside_the_first_turn_regenerates_from_root() -> None:
    msgs = [SYS, {"role": "user", "content": "a"}]
    result = reconcile(
        msgs, hashes(msgs), loaded(head=3, parent=-1, matched=0, found=True), derived=False, session_leading=[]
    )
    assert result.parent == -1 and result.new_input == msgs and result.branched


def test_delta_client_appends_to_head_and_drops_a_repeated_system_prompt() -> None:
    msgs = [SYS, {"role": "user", "content": "next"}]
    result = reconcile(msgs, hashes(msgs), loaded(head=4), derived=False, session_leading=hashes([SYS]))
    assert result.parent is None and result.new_input == [msgs[1]]


def test_delta_client_with_a_different_system_prompt_keeps_it() -> None:
    msgs = [{"role": "system", "content": "new rules"}, {"role": "user", "content": "next"}]
    result = reconcile(msgs, hashes(msgs), loaded(head=4), derived=False, session_leading=hashes([SYS]))
    assert result.new_input == msgs


def test_derived_session_without_match_starts_from_root() -> None:
    msgs = [SYS, {"role": "user", "content": "hello"}]
    result = reconcile(msgs, hashes(msgs), loaded(head=2), derived=True, session_leading=hashes([SYS]))
    assert result.parent == -1 and result.from_root and result.new_input == msgs


def test_prefix_query_skips_the_leading_block() -> None:
    msgs = [SYS, {"role": "developer", "content": "d"}, {"role": "user", "content": "u"}]
    chain = chain_hashes(hashes(msgs))
    offset, prefixes = prefix_query(chain, msgs, recent_only=True)
    assert offset == 2 and prefixes == chain[2:]


def test_long_requests_look_up_their_recent_prefixes_first() -> None:
    msgs = [SYS] + [{"role": "user", "content": str(n)} for n in range(100)]
    chain = chain_hashes(hashes(msgs))
    offset, prefixes = prefix_query(chain, msgs, recent_only=True)
    assert offset == 101 - RECENT_PREFIXES and prefixes == chain[offset:]
    assert needs_full_query(loaded(found=False), msgs)
    assert needs_full_query(loaded(found=True, parent=-1), msgs)
    assert not needs_full_query(loaded(found=True, parent=3, matched=99), msgs)
    assert not needs_full_query(loaded(found=False), msgs[:10])
