"""The checks every config value goes through, the constants they allow, and strategy specs."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import field
from typing import Any

from proxy.types import frozen

STRATEGY_NAMES = ("full", "turns", "summarize", "anchored", "reset")
CLEAR_TARGETS = ("tool-result", "thinking", "reasoning-tags")
USAGE_PREFERENCES = ("max", "feed_first", "tokenizer_first")
SPLITS = ("ratio", "recent-turns")
MAX_PROMPT_BYTES = 2000
HANDOFF_PROMPT = "About {n_remaining} tokens remain before this conversation is compacted. Note anything you must keep."
LOG_FORMATS = ("text", "json")
MODES = ("managed", "shadow")
UPSTREAM_APIS = ("openai", "anthropic")
STORE_FALSE = ("stateless", "manage")
BUDGET_PERIODS = ("day", "month")
KEY_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
CONTEXT_EDIT_BETAS = {
    "clear_tool_uses_20250919": "context-management-2025-06-27",
    "clear_thinking_20251015": "context-management-2025-06-27",
    "compact_20260112": "compact-2026-01-12",
}
"""The edits Anthropic's `context_management` takes (`context.server.anthropic`), each with the
`anthropic-beta` header a request that carries it needs."""

Check = Callable[[Any], str | None]


def positive(value: Any) -> str | None:
    return None if value > 0 else f"must be > 0, got {value}"


def non_negative(value: Any) -> str | None:
    return None if value >= 0 else f"must be >= 0, got {value}"


def ratio(value: Any) -> str | None:
    return None if 0 < value <= 1 else f"must be > 0 and <= 1, got {value}"


def unit(value: Any) -> str | None:
    return None if 0 <= value < 1 else f"must be >= 0 and < 1, got {value}"


def one_of(*allowed: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}, got {value!r}"

    return check


def port(value: Any) -> str | None:
    return None if 0 <= value <= 65535 else f"must be a port number 0-65535, got {value}"


def url(value: Any) -> str | None:
    ok = value.startswith(("http://", "https://"))
    return None if ok else f"must start with http:// or https://, got {value!r}"


def redis_url(value: Any) -> str | None:
    urls = [part.strip() for part in value.split(",")]
    ok = value == "embedded" or all(url.startswith(("redis://", "rediss://", "unix://")) for url in urls)
    if not ok:
        return f"must be 'embedded' or redis://, rediss:// or unix:// URLs (comma-separated), got {value!r}"
    if len(urls) > 1 and not all(url.startswith(("redis://", "rediss://")) for url in urls):
        return f"several URLs name the seed nodes of a cluster: redis:// or rediss:// only, got {value!r}"
    return None


def prompt(value: Any) -> str | None:
    size = len(value.encode())
    return None if size <= MAX_PROMPT_BYTES else f"must be at most {MAX_PROMPT_BYTES} UTF-8 bytes, got {size}"


def header_name(value: Any) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9-]+", value) else f"must be an HTTP header name, got {value!r}"


def key_name_problem(value: Any) -> str | None:
    """Why a gateway key name is not allowed, or None: it becomes the tenant of the key's sessions."""
    ok = isinstance(value, str) and KEY_NAME.fullmatch(value)
    return None if ok else f"must be 1-64 characters of A-Z a-z 0-9 . _ -, got {value!r}"


def sha256_hex(value: Any) -> str | None:
    return None if re.fullmatch(r"[0-9a-f]{64}", value) else "must be 64 lowercase hex digits (a sha256)"


def globs(value: Any) -> str | None:
    return None if value else "must list at least one model glob"


def strategy(value: Any) -> str | None:
    specs = value if isinstance(value, tuple) else (value,)
    if not specs:
        return "must name at least one strategy"
    for spec in specs:
        name = parse_strategy_spec(spec).name
        if name == "server":
            return f"{spec!r}: server needs a fallback strategy, e.g. server(summarize)"
        if name not in STRATEGY_NAMES:
            allowed = ", ".join(STRATEGY_NAMES)
            return (
                f"unknown strategy {spec!r}; allowed: {allowed}, background(<one of them>), server(<one of them>), "
                "background(server(<one of them>)), or a list"
            )
    return None


@frozen
class StrategySpec:
    """One part of a strategy spec: a policy name, maybe run in the background or behind `server`."""

    name: str
    background: bool = False
    server: bool = False


def _unwrap(spec: str, wrapper: str) -> str | None:
    spec = spec.strip()
    if spec.startswith(wrapper + "(") and spec.endswith(")"):
        return spec[len(wrapper) + 1 : -1].strip()
    return None


def parse_strategy_spec(spec: str) -> StrategySpec:
    """`"summarize"`, `"background(anchored)"`, `"server(summarize)"`, `"background(server(summarize))"`."""
    inner = _unwrap(spec, "background")
    background = inner is not None
    rest = inner if inner is not None else spec.strip()
    fallback = _unwrap(rest, "server")
    if fallback is not None:
        return StrategySpec(fallback, background, server=True)
    return StrategySpec(rest, background)


def context_management(value: Any) -> str | None:
    """`context.server.anthropic`: Anthropic's `context_management` object, `{edits: [{type, ...}]}`
    with known edit types (their other fields are Anthropic's to check), or empty for none."""
    if not value:
        return None
    if set(value) != {"edits"}:
        return f"must have exactly the key 'edits' (Anthropic's context_management), got {sorted(value)}"
    edits = value["edits"]
    if not isinstance(edits, list) or not edits:
        return "edits: must be a non-empty list of edits"
    for index, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in CONTEXT_EDIT_BETAS:
            return f"edits[{index}].type: must be one of {', '.join(CONTEXT_EDIT_BETAS)}, got {kind!r}"
    return None


def import_path(value: Any) -> str | None:
    ok = re.fullmatch(r"[A-Za-z_][\w.]*[:.][A-Za-z_]\w*", value)
    return None if ok else f"must be 'package.module:function', got {value!r}"


def worker_count(value: Any) -> int:
    """`server.workers` and `--workers`: an integer >= 1, or `auto` for the number of cores."""
    if value == "auto":
        return os.cpu_count() or 1
    if isinstance(value, str) and re.fullmatch(r"\d+", value.strip()):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ValueError(f"must be an integer >= 1 or 'auto', got {value!r}")


def checked(fn: Check, default: Any = dataclasses.MISSING) -> Any:
    if default is dataclasses.MISSING:
        return field(metadata={"check": fn})
    return field(default=default, metadata={"check": fn})


def parsed_by(parse: Callable[[Any], Any], default: Any) -> Any:
    """A field whose raw value `parse` turns into the setting, or refuses with ValueError."""
    return field(default=default, metadata={"parse": parse})
