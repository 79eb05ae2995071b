"""Shared type aliases: wire messages are plain JSON, so they are typed loosely here."""

from typing import Any, TypeAlias

JSON: TypeAlias = Any
JSONObject: TypeAlias = dict[str, Any]
Message: TypeAlias = dict[str, Any]
SessionId: TypeAlias = str
TenantId: TypeAlias = str
