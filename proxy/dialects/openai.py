"""Chat Completions upstreams (OpenAI and every OpenAI-compatible server): the core's own API.

The upstream body is the client's own with the composed messages spliced in (the composed
part is already serialized, so the rest of the body is serialized once and joined); a
streamed request always asks for `include_usage`, so the usage of every answer can be fed
back. The core's marks for other APIs (`proxy/context/model.py`) are removed first, and
only when the serialized messages show one (`has_marks` finds every mark `strip_marks`
removes, so a request from a door that makes marks but holds none is not re-serialized):
Anthropic's `cache_control` too, a Chat Completions client's own included (a session may
hold turns another door journaled with it). Answers are read as they come.
"""

from __future__ import annotations

import orjson

from proxy.context.model import ChatRequest, has_marks, strip_marks, uncached
from proxy.dialects.base import Outgoing
from proxy.upstream import Answer, UpstreamResponse

CHAT_PATH = "/v1/chat/completions"


class OpenAIChat:
    def request(
        self, chat: ChatRequest, messages_json: bytes, *, default_max_tokens: int, unmarked: bool = False
    ) -> Outgoing:
        if not unmarked and has_marks(messages_json):  # the request's, or a journaled turn's from another door
            messages_json = orjson.dumps(strip_marks(orjson.loads(messages_json)))
        return Outgoing(CHAT_PATH, upstream_body(chat, messages_json))

    def answer(self, response: UpstreamResponse) -> Answer:
        return response


def upstream_body(chat: ChatRequest, messages_json: bytes) -> bytes:
    """The client's body with the composed messages spliced in; streams always ask for usage; a
    marked request's tools without their `cache_control`."""
    rest = {k: v for k, v in chat.body.items() if k != "messages" and k != "anthropic"}
    if chat.marked and isinstance(rest.get("tools"), list):
        rest["tools"] = [uncached(tool) for tool in rest["tools"]]
    if chat.stream:
        rest["stream_options"] = {**(chat.body.get("stream_options") or {}), "include_usage": True}
    others = orjson.dumps(rest)
    if others == b"{}":
        return b"".join((b'{"messages":', messages_json, b"}"))
    return b"".join((b'{"messages":', messages_json, b",", others[1:]))  # one copy of a large history
