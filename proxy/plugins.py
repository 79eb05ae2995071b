"""User-supplied callables named in config as `package.module:function` (or dotted).

The validator, the overflow hooks and the context builder are loaded here once, at
start-up (a path that does not import is a config error naming the key), and called
through `call`, which awaits what an async function returns.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from proxy.errors import ConfigError


def import_callable(path: str, key: str) -> Callable[..., Any]:
    """The function `path` names; a `ConfigError` naming `key` when it cannot be imported."""
    module_name, _, attr = path.replace(":", ".").rpartition(".")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{key}: cannot import {path!r}: {exc}") from exc
    if not callable(fn):
        raise ConfigError(f"{key}: {path!r} is not callable")
    return fn  # type: ignore[no-any-return]


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a sync or async user function and return its result."""
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result
