"""Key policies, pure: allow-list globs, hashing, run-time fields."""

from __future__ import annotations

import pytest

from proxy.errors import BadRequest
from proxy.gateway.policy import KeyPolicy, hash_secret, new_policy, new_secret


def test_allow_list_globs_are_shell_style_and_case_sensitive() -> None:
    policy = KeyPolicy(name="a", sha256="", models=("gpt-4o*", "ctx-?", "[lq]lama-3"))
    allowed = ["gpt-4o", "gpt-4o-mini", "ctx-1", "llama-3", "qlama-3"]
    refused = ["gpt-4", "GPT-4o", "ctx-12", "xlama-3", "o1"]
    assert [policy.allows(m) for m in allowed] == [True] * len(allowed)
    assert [policy.allows(m) for m in refused] == [False] * len(refused)
    assert policy.allows(None), "a call that names no model (GET /v1/models) is not refused"
    assert KeyPolicy(name="b", sha256="").allows("anything")


def test_secrets_are_fresh_prefixed_and_stored_only_as_a_hash() -> None:
    secret = new_secret()
    assert secret.startswith("cp-") and len(secret) > 40 and secret != new_secret()
    policy = new_policy({"name": "n", "models": ["m*"], "rpm": 3}, secret)
    stored = policy.to_json()
    assert secret.encode() not in stored and hash_secret(secret).encode() in stored
    assert KeyPolicy.from_json("n", stored) == policy


@pytest.mark.parametrize(
    ("fields", "param"),
    [({"name": ""}, "name"), ({"name": "x" * 65}, "name"), ({"name": "n", "tpm": -1}, "tpm"),
     ({"name": "n", "rpm": True}, "rpm"), ({"name": "n", "budget_tokens": "5"}, "budget_tokens"),
     ({"name": "n", "models": []}, "models"), ({"name": "n", "models": [""]}, "models")],
)  # fmt: skip
def test_bad_run_time_fields_name_the_field(fields: dict[str, object], param: str) -> None:
    with pytest.raises(BadRequest) as info:
        new_policy(fields, "s")
    assert info.value.param == param
