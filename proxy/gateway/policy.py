"""A gateway key's policy: who it is (its name, the tenant of its sessions), what it may
call (model globs), and how much (rpm, tpm, a token budget per UTC day or month).

A key's secret is never kept: only its sha256, from which it cannot be recovered.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict
from fnmatch import fnmatchcase
from typing import Any

import orjson

from proxy.config import BUDGET_PERIODS, MODES, GatewayKeySettings, key_name_problem
from proxy.errors import BadRequest
from proxy.types import frozen

SECRET_PREFIX = "cp-"


@frozen
class KeyPolicy:
    name: str
    sha256: str
    models: tuple[str, ...] | None = None
    """Shell-style globs the key may call; None = any model."""
    rpm: int | None = None
    tpm: int | None = None
    budget_tokens: int | None = None
    budget_period: str = "day"
    source: str = "runtime"
    """config (from `gateway.keys`) | runtime (created through the CLI or the admin API)."""
    created: int = 0
    mode: str | None = None
    """`managed` or `shadow` for this key's turns; None: the model's or `context.mode`."""

    def allows(self, model: str | None) -> bool:
        """Whether the allow-list covers `model`; a request that names no model is allowed."""
        return self.models is None or model is None or any(fnmatchcase(model, glob) for glob in self.models)

    def public(self) -> dict[str, Any]:
        """The policy as the admin API and `keys list` show it: everything but the hash."""
        return {k: v for k, v in asdict(self).items() if k != "sha256"}

    def to_json(self) -> bytes:
        return orjson.dumps({k: v for k, v in asdict(self).items() if k not in ("name", "source")})

    @classmethod
    def from_json(cls, name: str, raw: bytes) -> KeyPolicy:
        fields = orjson.loads(raw)
        models = fields.pop("models", None)
        return cls(name=name, models=tuple(models) if models is not None else None, source="runtime", **fields)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    """A fresh key: `cp-` and 256 random bits."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def from_settings(key: GatewayKeySettings) -> KeyPolicy:
    return KeyPolicy(
        name=key.name,
        sha256=key.key_sha256 or hash_secret(key.key or ""),
        models=key.models,
        rpm=key.rpm,
        tpm=key.tpm,
        budget_tokens=key.budget_tokens,
        budget_period=key.budget_period,
        source="config",
        mode=key.mode,
    )


def new_policy(fields: Mapping[str, Any], secret: str) -> KeyPolicy:
    """A run-time key's policy from the admin API's JSON (or the CLI's flags); 400 naming a bad field."""
    unknown = set(fields) - {"name", "models", "rpm", "tpm", "budget_tokens", "budget_period", "mode"}
    if unknown:
        raise BadRequest(f"unknown field {min(unknown)!r}", param=min(unknown), code="unknown_parameter")
    problem = key_name_problem(fields.get("name"))
    if problem:
        raise BadRequest(f"name: {problem}", param="name", code="invalid_value")
    models = fields.get("models")
    if models is not None and (
        not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models)
    ):
        raise BadRequest("models: must be a non-empty list of model globs", param="models", code="invalid_value")
    rpm, tpm, budget_tokens = (_positive_int(fields, name) for name in ("rpm", "tpm", "budget_tokens"))
    period = fields.get("budget_period", "day")
    if period not in BUDGET_PERIODS:
        raise BadRequest(f"budget_period: must be day or month, got {period!r}", param="budget_period")
    mode = fields.get("mode")
    if mode is not None and mode not in MODES:
        raise BadRequest(f"mode: must be managed or shadow, got {mode!r}", param="mode", code="invalid_value")
    return KeyPolicy(
        name=fields["name"],
        sha256=hash_secret(secret),
        models=tuple(models) if models is not None else None,
        rpm=rpm,
        tpm=tpm,
        budget_tokens=budget_tokens,
        budget_period=period,
        created=int(time.time()),
        mode=mode,
    )


def _positive_int(fields: Mapping[str, Any], name: str) -> int | None:
    value = fields.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        raise BadRequest(f"{name}: must be a positive integer, got {value!r}", param=name, code="invalid_value")
    return value
