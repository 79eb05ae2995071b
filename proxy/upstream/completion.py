"""Reading a non-streamed chat completion: the one place its JSON is picked apart.

The relay (the client's answer) and the summarizer (a compression answer) both read
`choices[0].message` and `usage` through `parse_completion`.
"""

from __future__ import annotations

import orjson

from proxy.types import JSONObject, Message, frozen


class NotACompletion(ValueError):
    """The body is not a chat completion (not JSON, or no `choices[0].message`)."""


@frozen
class Completion:
    message: Message
    """The assistant message as a later request would send it back."""
    usage: JSONObject | None
    finish_reason: str | None = None


def parse_completion(body: bytes) -> Completion:
    try:
        parsed = orjson.loads(body)
        choice = parsed["choices"][0]
        raw = choice["message"]
        usage = parsed.get("usage")
        finish = choice.get("finish_reason")
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise NotACompletion("upstream answer was not a chat completion") from exc
    if not isinstance(raw, dict):
        raise NotACompletion("upstream answer was not a chat completion")
    return Completion(
        assistant_message(raw), usage if isinstance(usage, dict) else None, finish if isinstance(finish, str) else None
    )


def assistant_message(raw: JSONObject) -> Message:
    """An answer's message (or a stream's assembled delta) as it goes into the journal."""
    message: Message = {"role": raw.get("role") or "assistant", "content": raw.get("content")}
    for key in ("tool_calls", "refusal", "function_call", "thinking_blocks"):
        if raw.get(key):
            message[key] = raw[key]
    audio = raw.get("audio")
    if isinstance(audio, dict) and audio.get("id"):
        message["audio"] = {"id": audio["id"]}  # a request refers to earlier audio by id only
    return message


def error_of(body: bytes, status: int) -> JSONObject:
    """An upstream error answer as the journal keeps it: the status and OpenAI's error object."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {"status": status, "message": body[:500].decode(errors="replace")}
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return {"status": status, **(error if isinstance(error, dict) else {"message": str(parsed)[:500]})}
