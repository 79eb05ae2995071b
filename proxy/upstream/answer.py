"""What the relay reads an answer through: an upstream response, or one the proxy assembles.

`UpstreamResponse` is the plain case; the proxy's tool rounds (`proxy/turn/rounds.py`)
present several upstream answers as one through the same interface.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from multidict import CIMultiDict


class Answer(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def seconds(self) -> float:
        """From sending the (first) request to its answer's headers."""
        ...

    def relay_headers(self) -> CIMultiDict[str]: ...

    async def read(self) -> bytes: ...

    def iter_chunks(self) -> AsyncIterator[bytes]: ...

    def close(self) -> None: ...
