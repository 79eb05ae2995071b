"""The session endpoints' services: a session's journal and next context (`SessionAPI`), a past
turn's context rebuilt (`PastContexts`, `replay.py`), clearing a context, feedback on a turn."""

from proxy.session_api.past_context import PastContexts
from proxy.session_api.service import SessionAPI, SessionNotFound

__all__ = ["PastContexts", "SessionAPI", "SessionNotFound"]
