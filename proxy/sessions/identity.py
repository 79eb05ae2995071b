"""Who is asking and which conversation: tenant and session id.

The tenant is a sha256 of the caller's bearer key (or of `upstream.api_key` when the
caller sends none); the key itself is never stored or logged. The session comes from
the `/s/{session}/...` path, the session header, or, when neither is given, from the
conversation itself (`proxy/turn/derived.py`), so an unchanged app gets a stable session.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

from proxy.errors import BadRequest
from proxy.store.names import SessionKeys
from proxy.types import frozen

_SESSION_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
DERIVED_PREFIX = "auto-"


@frozen
class Identity:
    """The one shape of a session: whose (tenant), which (session), and whether the proxy
    derived it from the conversation; `keys` names its Redis keys."""

    tenant: str
    session: str
    derived: bool

    @property
    def keys(self) -> SessionKeys:
        return SessionKeys(self.tenant, self.session)


@lru_cache(maxsize=4096)
def tenant_of(authorization: str | None, fallback_key: str) -> str:
    """sha256 of the caller's credential (the bearer key, or the whole header when it is
    not a bearer one), else of the configured key; 32 hex characters for key names.
    Remembered for the few thousand most recent credentials (a team has few keys)."""
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


def requested_session(*, path_session: str | None, header_session: str | None, header_name: str) -> str | None:
    """The session the caller names (the path form wins, then the header); None: derive it
    from the conversation (see `proxy/turn/derived.py`)."""
    if path_session is not None:
        return validate_session_id(path_session, "path")
    if header_session is not None:
        return validate_session_id(header_session, header_name)
    return None
