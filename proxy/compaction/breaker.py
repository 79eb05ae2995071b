"""The compaction circuit breaker of one session, and its one stored format.

After `LIMIT` consecutive failures, compaction is skipped for `COOLDOWN_S`; then one
attempt is allowed (half-open), and a success closes it (landing a window writes a
closed breaker). `context-proxy sessions reset-breaker` closes it at once. Stored in
the session's meta as `"<failures>:<unix time of the last failure>"`; `CLOSED` is "0".
"""

from __future__ import annotations

import time

from proxy.types import frozen

LIMIT = 3
COOLDOWN_S = 300.0
CLOSED = "0"


@frozen
class Breaker:
    failures: int = 0
    last_failure: float = 0.0

    @classmethod
    def parse(cls, raw: str) -> Breaker:
        count, _, at = raw.partition(":")
        return cls(int(count or 0), float(at or 0))

    def is_open(self, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        return self.failures >= LIMIT and now - self.last_failure < COOLDOWN_S

    def after_failure(self, now: float | None = None) -> Breaker:
        return Breaker(self.failures + 1, time.time() if now is None else now)

    def dump(self) -> str:
        return f"{self.failures}:{self.last_failure}"
