"""The compression call: a strategy's `Summarizer`, made from the upstream client.

The compression request goes to the upstream with the client's own key (a team's
bill stays the team's) and a bounded timeout; any answer that is not a usable chat
completion raises, which the strategy turns into a `StrategyError`.
"""

from __future__ import annotations

import orjson

from proxy.compaction.strategies import Summarizer, Summary
from proxy.types import Message
from proxy.upstream import UpstreamClient
from proxy.upstream.completion import NotACompletion, parse_completion


class CompressionFailed(Exception):
    """The compression call did not return a usable answer."""


def make_summarizer(upstream: UpstreamClient, *, model: str, authorization: str | None, timeout_s: float) -> Summarizer:
    async def summarize(messages: list[Message]) -> Summary:
        body = orjson.dumps({"model": model, "messages": messages})
        answer = await upstream.post_json(
            "/v1/chat/completions", body, authorization=authorization, timeout_s=timeout_s
        )
        raw = await answer.read()
        if answer.status != 200:
            raise CompressionFailed(f"upstream answered {answer.status}: {raw[:300].decode(errors='replace')}")
        try:
            completion = parse_completion(raw)
        except NotACompletion as exc:
            raise CompressionFailed(str(exc)) from exc
        return Summary(text=str(completion.message.get("content") or ""), usage=completion.usage, model=model)

    return summarize
