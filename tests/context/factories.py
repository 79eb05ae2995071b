"""Build journal turns and histories without Redis (as mitmproxy's tflow builds flows)."""

from __future__ import annotations

from typing import Any

from proxy.compaction.strategies import CompactionInput, Summary
from proxy.compaction.strategies.split import SpanCut
from proxy.context.budget import Budget
from proxy.context.compose import History, build_history
from proxy.context.window import Window
from proxy.sessions import Turn


def turn(
    seq: int, user: Any, answer: Any = "ok", *, status: str = "completed", lead: tuple[dict[str, Any], ...] = ()
) -> Turn:
    inputs = [*lead, user if isinstance(user, dict) else {"role": "user", "content": user}]
    output = answer if isinstance(answer, dict) else {"role": "assistant", "content": answer}
    messages = [*inputs, output]
    return Turn(seq, status, tuple(inputs), output, tuple(10 for _ in messages))


def history(n: int, *, system: bool = True, window: Window | None = None) -> History:
    lead = ({"role": "system", "content": "sys"},) if system else ()
    turns = [turn(0, "u0", "a0", lead=lead)] + [turn(i, f"u{i}", f"a{i}") for i in range(1, n)]
    return build_history(window or Window(), turns)


def summarizing(
    cls: type[Any],
    *,
    split: str = "recent-turns",
    preserve_ratio: float = 0.8,
    preserve_recent: int = 1,
    min_shrink_ratio: float = 0.5,
    validator: Any = None,
) -> Any:
    """A `Summarize` or `Anchored` built as the registry builds it."""
    cut = SpanCut(split, preserve_ratio, preserve_recent)
    return cls(cut=cut, min_shrink_ratio=min_shrink_ratio, validator=validator)


def budget(window: int = 1000, trigger: int = 700, reserve: int = 0) -> Budget:
    return Budget(window, trigger, reserve)


class FakeSummarizer:
    def __init__(self, text: str = "<analysis>x</analysis><summary>short</summary>", fail: bool = False) -> None:
        self.text = text
        self.fail = fail
        self.calls: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, Any]]) -> Summary:
        self.calls.append(messages)
        if self.fail:
            raise RuntimeError("summarizer down")
        return Summary(self.text, {"prompt_tokens": 1}, "m")


def compaction_input(h: History, b: Budget, summarizer: FakeSummarizer, new_tokens: int = 10) -> CompactionInput:
    return CompactionInput(h, b, new_tokens, summarizer, "context://archive/win_1", lambda text: len(text) // 4)
