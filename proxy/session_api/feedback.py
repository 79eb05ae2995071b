"""Feedback on a turn (june's feedback): a preferred reply, a rating, a comment.

`POST /v1/sessions/{id}/turns/{turn}/feedback` appends one entry to the turn's feedback;
the turn itself is never edited. `GET /v1/sessions/{id}` shows the entries with each
turn, a context builder receives them, and with `context.use_preferred` later contexts
send a turn's latest preferred reply instead of its original output (`proxy/turn/projection.py`).
"""

from __future__ import annotations

import time

from proxy.errors import BadRequest
from proxy.types import JSONObject

FIELDS = ("preferred", "rating", "comment")


def parse_feedback(body: object) -> JSONObject:
    """A feedback entry from a request body; `BadRequest` naming the field otherwise."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object with preferred, rating and/or comment")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; allowed: {', '.join(FIELDS)}", param=unknown[0])
    if not any(key in body for key in FIELDS):
        raise BadRequest("feedback needs at least one of: preferred, rating, comment")
    preferred, rating, comment = body.get("preferred"), body.get("rating"), body.get("comment")
    if "preferred" in body and (not isinstance(preferred, str) or not preferred.strip()):
        raise BadRequest("preferred must be a non-empty string (the reply a person preferred)", param="preferred")
    if "rating" in body and (isinstance(rating, bool) or rating not in (1, -1)):
        raise BadRequest(f"rating must be 1 or -1, got {rating!r}", param="rating")
    if "comment" in body and not isinstance(comment, str):
        raise BadRequest("comment must be a string", param="comment")
    return {**{k: body[k] for k in FIELDS if k in body}, "created": time.time()}
