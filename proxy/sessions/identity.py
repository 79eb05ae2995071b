"""Who is asking and which conversation: tenant and session id.

The tenant is a sha256 of the caller's bearer key (or of `upstream.api_key` when the
caller sends none); the key itself is never stored or logged. The session comes from
the `/s/{session}/...` path, the session header, or, when neither is given, from the
conversation itself: a hash of its opening (leading system/developer messages and the
first user message), so an unchanged full-history app gets a stable session.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from proxy.errors import BadRequest
from proxy.sessions.messages import LEADING_ROLES, message_hash
from proxy.types import Message

_SESSION_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
DERIVED_PREFIX = "auto-"


@dataclass(frozen=True)
class Identity:
    tenant: str
    session: str
    derived: bool


def tenant_of(authorization: str | None, fallback_key: str) -> str:
    """sha256 of the caller's credential (the bearer key, or the whole header when it is
    not a bearer one), else of the configured key; 32 hex characters for key names."""
    key = fallback_key
    if authorization:
        key = authorization[7:].strip() if authorization.lower().startswith("bearer ") else authorization
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def validate_session_id(session: str, where: str) -> str:
    if not _SESSION_ID.fullmatch(session):
        raise BadRequest(
            f"invalid session id in {where}: use 1-128 characters of A-Z a-z 0-9 . _ : @ -",
            param=where,
            code="invalid_session_id",
        )
    return session


def derive_session(tenant: str, messages: list[Message]) -> str:
    """A session id from the conversation's opening: leading system messages + first user message."""
    digest = hashlib.sha256(tenant.encode())
    for message in messages:
        digest.update(message_hash(message).encode())
        if message.get("role") not in LEADING_ROLES:
            break
    return DERIVED_PREFIX + digest.hexdigest()[:32]


def identify(
    *, tenant: str, path_session: str | None, header_session: str | None, header_name: str, messages: list[Message]
) -> Identity:
    if path_session is not None:
        return Identity(tenant, validate_session_id(path_session, "path"), derived=False)
    if header_session is not None:
        return Identity(tenant, validate_session_id(header_session, header_name), derived=False)
    return Identity(tenant, derive_session(tenant, messages), derived=True)
