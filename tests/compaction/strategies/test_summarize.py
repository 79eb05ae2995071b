"""summarize: the ratio and recent-turns cuts, the prompt, the cleaned summary, pinned lifting."""

from __future__ import annotations

from proxy.compaction.prompts import SUMMARY_SECTIONS, CompressionPrompt, clean_summary, flatten
from proxy.compaction.strategies import Summarize
from proxy.compaction.strategies.split import split_ratio, split_recent
from proxy.compaction.strategies.summarizing import chunks
from proxy.context.compose import build_history
from proxy.context.window import Window
from tests.context.factories import FakeSummarizer, budget, compaction_input, history, summarizing, turn


def make(split: str = "ratio", **kw: object) -> Summarize:
    return summarizing(Summarize, split=split, **kw)  # type: ignore[no-any-return]


def test_ratio_cut_keeps_the_newest_units_that_fit() -> None:
    units = history(10).units  # 20 tokens each
    assert split_ratio(units, 60) == 7
    assert split_ratio(units, 10) == 10
    assert split_recent(units, 2) == 8


async def test_summarize_replaces_old_turns_with_a_clean_summary() -> None:
    h = history(10)
    summarizer = FakeSummarizer()
    # trigger 100 x 0.8 = 80, minus leading 10 and new input 10: keep 3 units of 20 tokens.
    result = await make().compact(compaction_input(h, budget(200, 100), summarizer))
    assert result.changed and len(result.kept) == 3 and len(result.evicted) == 7
    assert result.window.boundary == 6 and result.window.current == "win_1"
    content = result.window.summary["content"]  # type: ignore[index]
    assert "short" in content and "<analysis>" not in content and "context://archive/win_1" in content
    prompt = summarizer.calls[0]
    assert all(section in prompt[0]["content"] for section in SUMMARY_SECTIONS)
    assert "[user]: u0" in prompt[1]["content"]
    assert [m["content"] for m in result.history.messages()][:1] == ["sys"]


async def test_recent_turns_split() -> None:
    result = await make("recent-turns", preserve_recent=2).compact(
        compaction_input(history(6), budget(), FakeSummarizer())
    )
    assert [u.turns[0].seq for u in result.kept] == [4, 5]


async def test_previous_summary_is_folded_in() -> None:
    window = Window(current="win_1", boundary=3, summary={"role": "user", "content": "OLD SUMMARY"}, summary_tokens=5)
    h = build_history(window, [turn(i, f"u{i}") for i in range(4, 10)])
    summarizer = FakeSummarizer()
    await make("recent-turns").compact(compaction_input(h, budget(), summarizer))
    assert "OLD SUMMARY" in summarizer.calls[0][1]["content"]


async def test_pinned_turn_survives_verbatim_after_the_summary() -> None:
    pinned = {"role": "user", "content": "keep me", "pinned": True}
    turns = [
        turn(0, "u0", lead=({"role": "system", "content": "sys"},)),
        turn(1, pinned),
        *[turn(i, f"u{i}") for i in range(2, 8)],
    ]
    result = await make("recent-turns").compact(
        compaction_input(build_history(Window(), turns), budget(), FakeSummarizer())
    )
    contents = [m["content"] for m in result.history.messages()]
    assert contents[0] == "sys" and contents[1].startswith("This session is being continued")
    assert contents[2:] == ["keep me", "ok", "u7", "ok"]
    assert result.window.pinned[0]["pinned"] is True


async def test_nothing_to_evict_is_unchanged() -> None:
    result = await make("recent-turns", preserve_recent=5).compact(
        compaction_input(history(3), budget(), FakeSummarizer())
    )
    assert not result.changed


def test_tool_traffic_is_role_flattened() -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "look", "arguments": "{}"}}],
    }
    text = flatten([call, {"role": "tool", "tool_call_id": "c1", "content": "found"}])
    assert "[assistant called tool look (c1)]: {}" in text and "[tool result c1]: found" in text


def test_clean_summary_strips_the_scratchpad() -> None:
    assert clean_summary("<analysis>think</analysis>\n<summary>\nbody\n</summary>") == "body"
    assert clean_summary("untagged answer") == "untagged answer"


def test_clean_summary_matches_tags_in_any_case_and_collapses_blank_runs() -> None:
    raw = "<Analysis>secret plan</ANALYSIS>\n<SUMMARY>\n## Task\n\n\n\n\nDone.\n</Summary>"
    assert clean_summary(raw) == "## Task\n\nDone."
    assert clean_summary("<analysis>a</analysis>x\n\n\ny<analysis>b</analysis>") == "x\n\ny"


def test_compression_prompt_options() -> None:
    prompt = CompressionPrompt(guidelines=("Keep IDs",), custom_instructions=None, stub_threshold=5)
    assert prompt.instructions("Default.") == "Default.\nAlso follow these guidelines:\n- Keep IDs"
    assert CompressionPrompt(custom_instructions="Mine.").instructions("Default.") == "Mine."
    call = {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
    messages = [{"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "one two three four five six"},
                {"role": "tool", "tool_call_id": "c1", "content": "short"}]  # fmt: skip
    stubbed = prompt.stubbed(messages, lambda text: len(text.split()))
    assert stubbed[1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "[grep returned 6 tokens; omitted before summarization]",
    }
    assert stubbed[2] == messages[2] and stubbed[0] is messages[0]


def test_chunks_stay_within_the_limit() -> None:
    messages = [{"role": "user", "content": "x" * n} for n in (40, 40, 40, 200, 10)]
    parts = chunks(messages, 100, lambda text: len(text))
    assert [len(p) for p in parts] == [2, 1, 1, 1]
    assert [m for p in parts for m in p] == messages


async def test_a_span_too_large_for_one_request_is_folded_in_parts() -> None:
    h = build_history(Window(), [turn(i, f"u{i} " + "word " * 60) for i in range(8)])
    summarizer = FakeSummarizer()
    data = compaction_input(h, budget(window=400, trigger=300), summarizer)
    result = await make("recent-turns").compact(data)
    assert len(summarizer.calls) > 1, "the span went in parts"
    assert "short" in summarizer.calls[1][1]["content"], "each part is folded into the summary so far"
    assert result.changed and len(result.kept) == 1
