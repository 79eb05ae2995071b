"""Windows learned from refusals: each server's own words, as its source writes them."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.config import ContextSettings
from proxy.context.refusals import refusal_text, refused_window
from proxy.context.tokens import TokenCounter
from proxy.turn.windows import ModelWindows

REFUSALS: dict[str, tuple[Any, int]] = {
    # OpenAI (and vLLM's OpenAI server, same words)
    "openai": (
        {"error": {"message": "This model's maximum context length is 4096 tokens. However, you requested 5000 "
                   "tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages "
                   "or completion.", "type": "invalid_request_error", "param": "messages",
                   "code": "context_length_exceeded"}},
        4096,
    ),
    # vLLM's input processor (a prompt past max_model_len)
    "vllm-processor": (
        {"object": "error", "message": "The decoder prompt (length 5000) is longer than the maximum model length of "
         "4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
         "type": "BadRequestError", "param": None, "code": 400},
        4096,
    ),
    # SGLang, TokenizerManager: the input alone, then input + max_new_tokens; no "error" wrapper
    "sglang-input": (
        {"object": "error", "message": "The input (5000 tokens) is longer than the model's context length "
         "(4096 tokens).", "type": "BadRequestError", "param": None, "code": 400},
        4096,
    ),
    "sglang-total": (
        {"object": "error", "message": "Requested token count exceeds the model's maximum context length of 4096 "
         "tokens. You requested a total of 5000 tokens: 4000 tokens from the input messages and 1000 tokens for "
         "the completion. Please reduce the number of tokens in the input messages or the completion to fit "
         "within the limit.", "type": "BadRequestError", "param": None, "code": 400},
        4096,
    ),
    # llama.cpp's server, recent builds: the counts in the message and in the error object
    "llama.cpp": (
        {"error": {"code": 400, "message": "request (5000 tokens) exceeds the available context size (4096 tokens), "
                   "try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}},
        4096,
    ),
    # llama.cpp's server, earlier builds: the window only in the error object's n_ctx
    "llama.cpp-n_ctx": (
        {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                   "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}},
        4096,
    ),
    # llama.cpp, a task that cannot be split (embeddings)
    "llama.cpp-embedding": (
        {"error": {"code": 400, "message": "input (5000 tokens) is larger than the max context size (4096 tokens). "
                   "skipping", "type": "exceed_context_size_error"}},
        4096,
    ),
    # Hugging Face TGI: a 422, {"error": "<message>", "error_type": "validation"}
    "tgi-total": (
        {"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` "
         "tokens and 1000 `max_new_tokens`", "error_type": "validation"},
        4096,
    ),
    "tgi-input": (
        {"error": "Input validation error: `inputs` must have less than 4096 tokens. Given: 5000",
         "error_type": "validation"},
        4096,
    ),
    "tgi-older": (
        {"error": "Input validation error: input tokens + max_new_tokens must be <= 4096. Given: 4000 input tokens "
         "and 1000 max_new_tokens", "error_type": "validation"},
        4096,
    ),
    # LM Studio: {"error": "<message>"}
    "lm-studio-n_keep": (
        {"error": "The number of tokens to keep from the initial prompt is greater than the context length "
         "(n_keep: 5000>= n_ctx: 4096). Try to load the model with a larger context length, or provide a shorter "
         "input."},
        4096,
    ),
    "lm-studio-overflow": (
        {"error": "Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded "
         "with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context "
         "length, or provide a shorter input"},
        4096,
    ),
    "lm-studio-truncate": ({"error": "Cannot truncate prompt with n_keep (5000) >= n_ctx (4096)"}, 4096),
    # Anthropic
    "anthropic": (
        {"type": "error", "error": {"type": "invalid_request_error",
                                    "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
        200000,
    ),
}  # fmt: skip


@pytest.mark.parametrize(("body", "window"), list(REFUSALS.values()), ids=list(REFUSALS))
def test_each_servers_refusal_names_its_window(body: Any, window: int) -> None:
    assert refused_window(body) == window
    windows = windows_of(1_000_000)
    assert windows.learn("m", body) == window
    assert windows.window("m") == window


@pytest.mark.parametrize("server", [name for name in REFUSALS if name != "llama.cpp-n_ctx"], ids=lambda name: str(name))
def test_the_message_alone_is_enough_where_it_has_the_number(server: str) -> None:
    body, window = REFUSALS[server]
    assert refused_window(refusal_text(body)) == window


def test_the_message_is_found_in_every_shape() -> None:
    assert refusal_text({"error": {"message": "a"}}) == "a"
    assert refusal_text({"error": "b", "error_type": "validation"}) == "b"
    assert refusal_text({"object": "error", "message": "c"}) == "c"
    assert refusal_text("d") == "d"
    assert refusal_text({"error": 1}) == refusal_text({"message": None}) == refusal_text({}) == ""


@pytest.mark.parametrize(
    "body",
    [
        "Rate limit reached for gpt-4o: Limit 30000, Requested 40000",
        {"error": {"message": "the request exceeds the available context size, try increasing it"}},
        {"error": {"message": "x", "n_ctx": True}},
        {"error": {"message": "x", "n_ctx": "4096"}},
        {"error": {"message": "x", "n_ctx": 0}},
        {"error": "The number of tokens to keep from the initial prompt is greater than the context length."},
        "maximum context length is " + "9" * 5000 + " tokens",
    ],
    ids=["rate-limit", "no-number", "bool", "string", "zero", "lm-studio-no-number", "huge-number"],
)
def test_a_refusal_without_a_window_teaches_nothing(body: Any) -> None:
    assert refused_window(body) is None
    assert windows_of(128_000).learn("m", body) is None


def test_only_a_smaller_window_is_learned() -> None:
    windows = windows_of(100_000)
    body, _ = REFUSALS["anthropic"]
    assert windows.learn("m", body) is None, "200000 is not smaller than the configured 100000"
    assert windows.learn("m", REFUSALS["llama.cpp"][0]) == 4096
    assert windows.learn("m", REFUSALS["llama.cpp"][0]) is None, "already known"
    assert windows.window("m") == 4096 and windows_of(2048).window("m") == 2048


def windows_of(context_window: int) -> ModelWindows:
    return ModelWindows(ContextSettings(context_window=context_window), TokenCounter({}))
