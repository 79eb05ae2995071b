"""The compression call: a strategy's `Summarizer`, made from the upstream client.

The compression request goes to the upstream in its dialect, with the client's own key (a
team's bill stays the team's) and a bounded timeout; any answer that is not a usable chat
completion raises, which the strategy turns into a `StrategyError`.
"""

from __future__ import annotations

import orjson

from proxy.compaction.strategies import Summarizer, Summary
from proxy.context.model import ChatRequest
from proxy.dialects import dialect_for
from proxy.types import Message
from proxy.upstream import UpstreamClient
from proxy.upstream.completion import NotACompletion, parse_completion


class CompressionFailed(Exception):
    """The compression call did not return a usable answer."""


def make_summarizer(
    upstream: UpstreamClient, *, model: str, authorization: str | None, timeout_s: float, max_tokens: int
) -> Summarizer:
    dialect = dialect_for(upstream.api)

    async def summarize(messages: list[Message]) -> Summary:
        messages_json = orjson.dumps(messages)
        chat = ChatRequest({"model": model}, b"", model, messages, stream=False, include_usage=False)
        outgoing = dialect.request(chat, messages_json, default_max_tokens=max_tokens)
        response = await upstream.post_json(
            outgoing.path, outgoing.body, authorization=authorization, timeout_s=timeout_s
        )
        answer = dialect.answer(response)
        raw = await answer.read()
        if answer.status != 200:
            raise CompressionFailed(f"upstream answered {answer.status}: {raw[:300].decode(errors='replace')}")
        try:
            completion = parse_completion(raw)
        except NotACompletion as exc:
            raise CompressionFailed(str(exc)) from exc
        return Summary(text=str(completion.message.get("content") or ""), usage=completion.usage, model=model)

    return summarize
