"""Token counting: the chat formula, the offline fallback, calibration."""

from __future__ import annotations

import logging

import pytest

from proxy.context.tokens import FALLBACK_ENCODING, TokenCounter, count_message, request_overhead


async def test_unknown_model_falls_back_once_and_is_calibrated(caplog: pytest.LogCaptureFixture) -> None:
    counter = TokenCounter({"pinned-model": FALLBACK_ENCODING})
    encoder = await counter.encoder_for("some-llama")
    assert encoder.name == FALLBACK_ENCODING
    assert await counter.encoder_for("some-llama") is encoder
    assert not counter.is_native("some-llama", encoder)
    assert counter.calibration("some-llama", encoder) == 1.0
    counter.observe_usage("some-llama", reported=150, local=100)
    assert counter.calibration("some-llama", encoder) == 1.5
    counter.observe_usage("some-llama", reported=100, local=100)
    assert counter.calibration("some-llama", encoder) == pytest.approx(1.4)


async def test_a_failed_download_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    counter = TokenCounter()
    with caplog.at_level(logging.WARNING, logger="context_proxy.tokens"):
        first = await counter.encoder_for("gpt-4o")  # o200k_base: no network here
        second = await counter.encoder_for("gpt-4o-2024-08-06")
    assert first is second and first.name == FALLBACK_ENCODING
    assert len([r for r in caplog.records if "unavailable" in r.message]) <= 1


async def test_chat_formula_counts_names_tool_calls_and_tools() -> None:
    encoder = await TokenCounter().encoder_for("x-model")
    plain = count_message(encoder, {"role": "user", "content": "hello world"})
    assert plain == 3 + 1 + 2
    assert count_message(encoder, {"role": "user", "content": "hello world", "name": "bob"}) > plain
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": '{"a": 1}'}}],
    }
    assert count_message(encoder, call) > 3
    assert request_overhead(encoder, None) == 3
    assert request_overhead(encoder, [{"type": "function", "function": {"name": "f"}}]) > 13


def test_the_lean_encoding_rests_on_a_private_field_that_this_tiktoken_still_has() -> None:
    """`_lean` drops `Encoding._mergeable_ranks`: if tiktoken renames or starts using it
    for encoding, this fails loudly instead of the proxy silently keeping 15 MB or
    counting wrong."""
    import tiktoken

    from proxy.context.tokens import _lean

    def fresh() -> tiktoken.Encoding:  # get_encoding() hands out one shared, maybe already lean, copy
        return tiktoken.Encoding(**tiktoken.registry.ENCODING_CONSTRUCTORS[FALLBACK_ENCODING]())  # type: ignore[index]

    whole = fresh()
    assert isinstance(whole._mergeable_ranks, dict) and len(whole._mergeable_ranks) > 50_000
    lean = _lean(fresh())
    assert lean._mergeable_ranks == {}  # type: ignore[attr-defined]
    text = "Pinned: tiktoken's private ranks, 12 345 tokens — ünïcödé, code `x = f(y)`\n" * 20
    assert lean.encode_ordinary(text) == whole.encode_ordinary(text)
