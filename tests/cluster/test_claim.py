"""The compaction claim's tests, run as they are against the cluster (`tests/cluster/conftest.py`)."""

from __future__ import annotations

from tests.turn.test_claim import (
    test_a_request_that_cannot_get_the_claim_in_time_and_does_not_fit_is_refused,
    test_two_replicas_make_one_summarizer_call_for_one_compaction,
)

__all__ = [
    "test_a_request_that_cannot_get_the_claim_in_time_and_does_not_fit_is_refused",
    "test_two_replicas_make_one_summarizer_call_for_one_compaction",
]
