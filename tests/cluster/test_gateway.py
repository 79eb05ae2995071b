"""The gateway's limits, keys and tenants on the cluster: every script touches one slot.

The bodies live with the single-server tests (`tests/gateway/`); importing them here runs
them again with this directory's fixtures: the proxy on `redis.cluster: true`.
"""

from __future__ import annotations

from tests.gateway.test_auth import (
    gateway,
    test_allow_list_refuses_other_models_managed_and_passed_through,
    test_tenant_is_the_key_name_so_a_rotated_key_keeps_its_sessions,
)
from tests.gateway.test_limits import (
    test_budget_is_refused_as_insufficient_quota,
    test_limited_keys_get_headers_on_every_response_and_unlimited_keys_none,
    test_rpm_holds_in_total_across_two_replicas,
    test_tpm_holds_in_total_across_two_replicas_and_is_corrected_by_usage,
)
from tests.gateway.test_runtime_keys import replicas, test_admin_api_refuses_duplicates_bad_fields_and_wrong_keys

__all__ = [
    "gateway",
    "replicas",
    "test_admin_api_refuses_duplicates_bad_fields_and_wrong_keys",
    "test_allow_list_refuses_other_models_managed_and_passed_through",
    "test_budget_is_refused_as_insufficient_quota",
    "test_limited_keys_get_headers_on_every_response_and_unlimited_keys_none",
    "test_rpm_holds_in_total_across_two_replicas",
    "test_tenant_is_the_key_name_so_a_rotated_key_keeps_its_sessions",
    "test_tpm_holds_in_total_across_two_replicas_and_is_corrected_by_usage",
]
