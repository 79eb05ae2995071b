"""Shared type aliases: wire messages are plain JSON, so they are typed loosely here."""

from typing import Any, TypeAlias

JSONObject: TypeAlias = dict[str, Any]
Message: TypeAlias = dict[str, Any]
