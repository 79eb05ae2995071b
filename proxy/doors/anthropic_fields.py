"""Validation of a Messages request's fields: each check refuses with a `BadRequest` naming the field path.

The messages follow Anthropic's own (pydantic's) wording, `<path>: Field required`,
`<path>: Extra inputs are not permitted`, so a client sees what Anthropic would say.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest
from proxy.types import JSONObject


class Breakpoints:
    """Counts the `cache_control` markers met while parsing, validating each."""

    def __init__(self) -> None:
        self.count = 0

    def take(self, block: JSONObject, param: str) -> JSONObject | None:
        marker = block.get("cache_control")
        if marker is None:
            return None
        at = f"{param}.cache_control" if param else "cache_control"
        marker = as_object(marker, at)
        as_string(required(marker, "type", at), f"{at}.type")
        self.count += 1
        return marker


def required(obj: JSONObject, key: str, base: str) -> Any:
    if key not in obj:
        param = f"{base}.{key}" if base else key
        raise BadRequest(f"{param}: Field required", param=param)
    return obj[key]


def as_object(value: object, param: str) -> JSONObject:
    if not isinstance(value, dict):
        raise BadRequest(f"{param}: Input should be an object", param=param)
    return value


def as_list(value: object, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise BadRequest(f"{param}: Input should be a valid list", param=param)
    return value


def as_string(value: object, param: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{param}: Input should be a valid string", param=param)
    return value


def as_bool(value: object, param: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{param}: Input should be a valid boolean", param=param)
    return value


def as_int(value: object, param: str, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"{param}: Input should be a valid integer", param=param)
    if value < minimum:
        raise BadRequest(f"{param}: Input should be greater than or equal to {minimum}", param=param)
    return value


def as_number(value: object, param: str, *, low: float, high: float) -> float | int:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise BadRequest(f"{param}: Input should be a valid number", param=param)
    if not low <= value <= high:
        raise BadRequest(f"{param}: Input should be between {low} and {high}", param=param)
    return value


def only_keys(block: JSONObject, allowed: frozenset[str], param: str) -> None:
    for key in block:
        if key not in allowed:
            raise BadRequest(f"{param}.{key}: Extra inputs are not permitted", param=f"{param}.{key}")


def refuse_set(block: JSONObject, key: str, param: str, why: str) -> None:
    """A field Anthropic knows but the core cannot carry: refused unless absent or null."""
    if block.get(key) is not None:
        raise BadRequest(f"{param}.{key}: {why}", param=f"{param}.{key}")


def marked(part: JSONObject, marker: JSONObject | None) -> JSONObject:
    """`part` with the client's `cache_control` marker on it, if it had one."""
    if marker is not None:
        part["cache_control"] = marker
    return part
