"""How a turn that did not complete is named in the journal (june's statuses).

- `canceled`: the caller aborted the turn (the client disconnected mid-answer).
- `interrupted`: something else cut it off: the proxy shutting down, or an upstream that
  stalled (it did not finish its answer within `upstream.timeout_s`).
- `failed`: the upstream answered with an error, or its connection broke.

Only `completed` turns reach a later context, whatever the others are called.
"""

from __future__ import annotations

from proxy.errors import ProxyError, UpstreamTimeout
from proxy.sessions.journal import Status


def ended_by(error: ProxyError) -> Status:
    """The status of a turn whose answer ended with `error` while it was being read."""
    return "interrupted" if isinstance(error, UpstreamTimeout) else "failed"


def cut_off(*, stopping: bool) -> Status:
    """The status of a turn whose request was cancelled: by shutdown, or by the caller."""
    return "interrupted" if stopping else "canceled"
