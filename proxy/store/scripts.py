"""The Lua scripts of `lua/`, each called by its SHA and loaded again when a server lacks it.

A server forgets its scripts on restart, on SCRIPT FLUSH, and a replica promoted to
primary never had them; NOSCRIPT means nothing ran, so loading and calling again is safe.
On a cluster, SCRIPT LOAD goes to every primary.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError

from proxy.store.connection import Client

Arg = bytes | str | int
Execute = Callable[..., Awaitable[Any]]
"""One command's call: redis-py's `execute_command`, or `Line.call`."""


class Script:
    """One script of `lua/`; the store calls it through a typed method naming KEYS and ARGV."""

    def __init__(self, client: Client, name: str, execute: Execute | None = None) -> None:
        self._client = client
        self._execute = execute or client.execute_command
        """How a call goes (`Store.execute`: on the store's line where it has one)."""
        self._source = resources.files("proxy.store").joinpath("lua", f"{name}.lua").read_text()
        self._sha = hashlib.sha1(self._source.encode()).hexdigest()

    def command(self, keys: Sequence[str], args: Sequence[Arg]) -> tuple[Arg, ...]:
        """The EVALSHA command, to queue in a pipeline."""
        return ("EVALSHA", self._sha, len(keys), *keys, *args)

    async def load(self) -> None:
        await self._client.script_load(self._source)

    async def __call__(self, *, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        try:
            return await self._execute(*self.command(keys, args))
        except NoScriptError:
            await self.load()
            return await self._execute(*self.command(keys, args))
