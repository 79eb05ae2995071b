"""Reconcile rules as pure functions: full-history, trimming, delta, divergence, derived sessions."""

from __future__ import annotations

from proxy.sessions import chain_hashes, message_hash, needs_full_query, prefix_query, reconcile
from proxy.sessions.reconcile import MAX_OVERLAP_MESSAGES, RECENT_PREFIXES, may_be_trimmed, split_leading
from proxy.store import LoadedSession

SYS = {"role": "system", "content": "rules"}
U = {"role": "user", "content": "a"}
A = {"role": "assistant", "content": "b"}
U2 = {"role": "user", "content": "c"}


def loaded(
    *, head: int = -1, parent: int = -1, matched: int = 0, found: bool = False, trimmed: bool = False
) -> LoadedSession:
    return LoadedSession(head, parent, matched, found, trimmed, True, None, None, "0", ":win_0", False, [])


def hashes(messages: list[dict[str, str]]) -> list[str]:
    return [message_hash(m) for m in messages]


def test_the_system_block_is_split_from_the_conversation() -> None:
    dev = {"role": "developer", "content": "d"}
    assert split_leading([SYS, dev, U, A]) == ([SYS, dev], [U, A])
    assert split_leading([U, SYS]) == ([], [U, SYS]), "only a leading block is the system prompt"
    assert split_leading([SYS]) == ([], [SYS]), "a request of system messages only is all conversation"


def test_rule_2_full_history_request_adds_only_what_follows_the_match() -> None:
    conv = [U, A, U2]
    result = reconcile(conv, hashes(conv), loaded(head=0, parent=0, matched=2, found=True), derived=False)
    assert result.new_input == [U2] and result.parent == 0 and not result.branched and not result.trimmed


def test_rule_2_a_match_off_the_head_is_a_branch() -> None:
    conv = [U, A, {"role": "user", "content": "edited"}]
    result = reconcile(conv, hashes(conv), loaded(head=5, parent=0, matched=2, found=True), derived=False)
    assert result.branched and result.parent == 0 and result.new_input == [conv[2]]


def test_rule_2_a_match_inside_the_first_turn_regenerates_from_root() -> None:
    result = reconcile([U], hashes([U]), loaded(head=3, parent=-1, matched=0, found=True), derived=False)
    assert result.parent == -1 and result.new_input == [U] and result.branched


def test_rule_3_a_trimmed_window_attaches_where_its_run_ends() -> None:
    own_summary = {"role": "user", "content": "(earlier: we talked about X)"}
    conv = [own_summary, U, A, U2]
    found = loaded(head=7, parent=7, matched=3, found=True, trimmed=True)
    result = reconcile(conv, hashes(conv), found, derived=False)
    assert result.trimmed and result.parent == 7 and not result.branched
    assert result.new_input == [U2], "the run and the app's own summary are not new input"
    older = reconcile(conv, hashes(conv), loaded(head=9, parent=7, matched=3, found=True, trimmed=True), derived=True)
    assert older.branched and older.parent == 7


def test_rule_3_is_tried_only_for_a_conversation_with_an_answer_in_it() -> None:
    assert may_be_trimmed([A, U2])
    assert not may_be_trimmed([U, U2]), "a delta client that says 'yes' twice is no trimming client"
    assert not may_be_trimmed([A] * (MAX_OVERLAP_MESSAGES + 1))


def test_rule_4_a_derived_session_without_match_starts_from_root() -> None:
    result = reconcile([U], hashes([U]), loaded(head=2), derived=True)
    assert result.parent == -1 and result.from_root and result.new_input == [U]


def test_rule_5_delta_client_appends_to_the_head() -> None:
    result = reconcile([U2], hashes([U2]), loaded(head=4), derived=False)
    assert result.parent is None and result.new_input == [U2] and not result.from_root


def test_long_requests_look_up_their_recent_prefixes_first() -> None:
    conv = [{"role": "user", "content": str(n)} for n in range(100)]
    chain = chain_hashes(hashes(conv))
    offset, prefixes = prefix_query(chain, recent_only=True)
    assert offset == 100 - RECENT_PREFIXES and prefixes == chain[offset:]
    assert prefix_query(chain, recent_only=False) == (0, chain)
    assert needs_full_query(loaded(found=False), conv)
    assert needs_full_query(loaded(found=True, parent=-1), conv)
    assert not needs_full_query(loaded(found=True, parent=3, matched=99), conv)
    assert not needs_full_query(loaded(found=False), conv[:10])
