"""The session and overflow tests that matter, run as they are against the cluster.

The bodies live with the single-server tests; importing them here runs them again with
this directory's fixtures (`tests/cluster/conftest.py`): the proxy on `redis.cluster: true`.
"""

from __future__ import annotations

from tests.handlers.test_overflow import (
    test_a_branch_from_before_the_boundary_never_sees_the_other_branch_summary,
    test_prefix_is_byte_identical_between_compactions,
    test_summarizer_failures_lose_nothing,
)
from tests.handlers.test_real_apps import test_two_conversations_that_both_start_with_hi_stay_two_sessions
from tests.handlers.test_session_list import (
    test_a_deleted_session_leaves_the_list,
    test_a_key_lists_its_own_sessions_newest_first_in_pages,
    test_sessions_are_listed_newest_first_with_their_figures,
)
from tests.handlers.test_sessions import (
    test_concurrent_turns_are_all_journaled_once,
    test_delete_forgets_the_session,
    test_delta_client_turns_reach_upstream_as_one_conversation,
    test_edited_message_starts_a_branch_and_old_path_stays,
    test_failed_turn_is_kept_out_of_later_context,
    test_full_history_client_is_not_duplicated,
    test_full_history_client_without_session_id_gets_a_stable_derived_session,
    test_replicas_share_sessions_and_caches_never_go_stale,
    test_streamed_turn_is_in_next_history,
    test_tenants_are_isolated,
)
from tests.test_cli import test_sessions_commands
from tests.turn.test_background import (
    test_background_compaction_lands_on_a_later_request,
    test_one_job_per_session_across_replicas,
    test_two_replicas_compacting_one_session_at_once_call_the_summarizer_once,
)

__all__ = [
    "test_a_branch_from_before_the_boundary_never_sees_the_other_branch_summary",
    "test_a_deleted_session_leaves_the_list",
    "test_a_key_lists_its_own_sessions_newest_first_in_pages",
    "test_background_compaction_lands_on_a_later_request",
    "test_concurrent_turns_are_all_journaled_once",
    "test_delete_forgets_the_session",
    "test_delta_client_turns_reach_upstream_as_one_conversation",
    "test_edited_message_starts_a_branch_and_old_path_stays",
    "test_failed_turn_is_kept_out_of_later_context",
    "test_full_history_client_is_not_duplicated",
    "test_full_history_client_without_session_id_gets_a_stable_derived_session",
    "test_one_job_per_session_across_replicas",
    "test_prefix_is_byte_identical_between_compactions",
    "test_replicas_share_sessions_and_caches_never_go_stale",
    "test_sessions_are_listed_newest_first_with_their_figures",
    "test_sessions_commands",
    "test_streamed_turn_is_in_next_history",
    "test_summarizer_failures_lose_nothing",
    "test_tenants_are_isolated",
    "test_two_conversations_that_both_start_with_hi_stay_two_sessions",
    "test_two_replicas_compacting_one_session_at_once_call_the_summarizer_once",
]
