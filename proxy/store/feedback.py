"""Reading feedback as `add_feedback.lua` stores it: `feedback:<seq>` fields of a session's meta."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

_PREFIX = "feedback:"


def feedback_by_turn(meta: Mapping[str, str]) -> dict[int, list[Any]]:
    """Feedback entries by turn seq."""
    return {int(k[len(_PREFIX) :]): orjson.loads(v) for k, v in meta.items() if k.startswith(_PREFIX)}
