"""Checks on client JSON in OpenAI's wording: each failure is a BadRequest whose `param` is the field's path.

Every field may arrive as any JSON type; these helpers are the only place that tests one, so
no KeyError or TypeError reaches the client as a 500.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest
from proxy.types import JSONObject


def kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def invalid_type(path: str, expected: str, value: object) -> BadRequest:
    return BadRequest(
        f"Invalid type for '{path}': expected {expected}, but got {kind(value)} instead.",
        param=path,
        code="invalid_type",
    )


def missing(path: str) -> BadRequest:
    return BadRequest(f"Missing required parameter: '{path}'.", param=path, code="missing_required_parameter")


def invalid_value(path: str, value: object, allowed: tuple[str, ...]) -> BadRequest:
    supported = ", ".join(f"'{a}'" for a in allowed)
    shown = f"'{value[:100]}'" if isinstance(value, str) else kind(value)
    return BadRequest(
        f"Invalid value: {shown}. Supported values are: {supported}.",
        param=path,
        code="invalid_value",
    )


def unsupported(path: str, why: str) -> BadRequest:
    return BadRequest(f"'{path}' is not supported by this proxy: {why}", param=path, code="unsupported_parameter")


def obj(value: object, path: str, allowed: frozenset[str]) -> JSONObject:
    if not isinstance(value, dict):
        raise invalid_type(path or "body", "an object", value)
    if value.keys() <= allowed:
        return value
    where = at(path, min(k for k in value if k not in allowed))
    raise BadRequest(f"Unknown parameter: '{where}'.", param=where, code="unknown_parameter")


def array(value: object, path: str, *, most: int | None = None) -> list[Any]:
    if not isinstance(value, list):
        raise invalid_type(path, "an array", value)
    if most is not None and len(value) > most:
        raise BadRequest(
            f"Invalid '{path}': array too long. Expected an array with maximum length {most}, "
            f"but got an array with length {len(value)} instead.",
            param=path,
            code="array_above_max_length",
        )
    return value


def string(obj: JSONObject, key: str, path: str, *, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise missing(at(path, key))
        return None
    if not isinstance(value, str):
        raise invalid_type(at(path, key), "a string", value)
    return value


def choice(obj: JSONObject, key: str, path: str, allowed: tuple[str, ...]) -> str | None:
    value = string(obj, key, path)
    if value is not None and value not in allowed:
        raise invalid_value(at(path, key), value, allowed)
    return value


def boolean(obj: JSONObject, key: str, path: str = "") -> bool | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, bool):
        raise invalid_type(at(path, key), "a boolean", value)
    return value


def number(obj: JSONObject, key: str, low: float, high: float, *, integer: bool) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise invalid_type(key, "an integer" if integer else "a number", value)
    what = "integer" if integer else "decimal"
    if value < low:
        raise BadRequest(
            f"Invalid '{key}': {what} below minimum value. Expected a value >= {low:g}, but got {value} instead.",
            param=key,
            code=f"{what}_below_min_value",
        )
    if value > high:
        raise BadRequest(
            f"Invalid '{key}': {what} above maximum value. Expected a value <= {high:g}, but got {value} instead.",
            param=key,
            code=f"{what}_above_max_value",
        )
    return value


def metadata(value: object, path: str = "metadata") -> JSONObject | None:
    """OpenAI's metadata: at most 16 string pairs, keys up to 64 characters, values up to 512."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid_type(path, "an object", value)
    if len(value) > 16:
        raise BadRequest(f"Invalid '{path}': at most 16 key-value pairs, got {len(value)}.", param=path)
    for key, item in value.items():
        where = at(path, key)
        if len(key) > 64:
            raise BadRequest(f"Invalid '{path}': keys are at most 64 characters.", param=where)
        if not isinstance(item, str):
            raise invalid_type(where, "a string", item)
        if len(item) > 512:
            raise BadRequest(f"Invalid '{where}': values are at most 512 characters.", param=where)
    return value
