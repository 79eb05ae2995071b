"""Token counting: the chat formula, the offline fallback, calibration."""

from __future__ import annotations

import asyncio
import base64
import logging
import subprocess
import sys
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
import pytest
import tiktoken
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.context.tokens import FALLBACK_ENCODING, TokenCounter, count_message, request_overhead

SAMPLE = "Pinned: tiktoken's ranks, 12 345 tokens — ünïcödé, 中文, code `x = f(y)`\n\t  done?!"


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
    assert len([r for r in caplog.records if "could not be loaded" in r.message]) <= 1


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "context_proxy.tokens" and r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    "error",
    [PermissionError(13, "Permission denied", "/opt/tiktoken/9b5ad7.tmp"), OSError("disk on fire"), RuntimeError("?")],
    ids=["permission", "oserror", "anything"],
)
async def test_any_failure_to_load_falls_back_once_in_one_short_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, error: Exception
) -> None:
    real = tiktoken.get_encoding
    calls: list[str] = []

    def failing(name: str) -> Any:
        calls.append(name)
        if name == FALLBACK_ENCODING:
            return real(name)
        raise error

    monkeypatch.setattr(tiktoken, "get_encoding", failing)
    counter = TokenCounter()
    with caplog.at_level(logging.WARNING, logger="context_proxy.tokens"):
        encoders = [await counter.encoder_for(m) for m in ("gpt-4o", "gpt-4o", "gpt-4o-2024-08-06", "gpt-4o")]
    assert {e.name for e in encoders} == {FALLBACK_ENCODING}
    assert calls.count("o200k_base") == 1, "never retried per request"
    (line,) = _warnings(caplog)
    assert line.startswith("encoding o200k_base (model gpt-4o) could not be loaded (")
    assert line.endswith(f"); counting with {FALLBACK_ENCODING} from now on")
    assert len(line) < 160 and "\n" not in line
    if isinstance(error, PermissionError):
        assert "(Permission denied: /opt/tiktoken/9b5ad7.tmp)" in line


def test_a_failed_download_is_named_in_a_few_words(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """requests' error carries the whole chain (pool, URL, resolver): the line names only the failure."""
    requests = pytest.importorskip("requests")
    error = requests.ConnectionError("HTTPSConnectionPool(host='x', port=443): Max retries exceeded " + "x" * 300)
    real = tiktoken.get_encoding

    def offline_only(name: str) -> Any:
        if name == FALLBACK_ENCODING:
            return real(name)
        raise error

    monkeypatch.setattr(tiktoken, "get_encoding", offline_only)
    with caplog.at_level(logging.WARNING, logger="context_proxy.tokens"):
        assert TokenCounter()._load("o200k_base", "gpt-4o").name == FALLBACK_ENCODING
    expected = (
        "encoding o200k_base (model gpt-4o) could not be loaded (download failed: ConnectionError); counting with"
    )
    assert _warnings(caplog) == [f"{expected} {FALLBACK_ENCODING} from now on"]


def test_an_unwritable_cache_directory_still_counts_with_the_fallback(tmp_path: Path) -> None:
    """tiktoken copies even the bundled fallback into TIKTOKEN_CACHE_DIR; when it cannot (a
    read-only image), the fallback is read directly and counts as tiktoken's own build does."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")  # unwritable under it even for root
    script = (
        "import asyncio\n"
        "from proxy.context.tokens import TokenCounter\n"
        "async def main():\n"
        "    encoder = await TokenCounter().encoder_for('some-llama')\n"
        f"    print(encoder.name, encoder.encode_ordinary({SAMPLE!r}))\n"
        "asyncio.run(main())\n"
    )
    env = {"TIKTOKEN_CACHE_DIR": str(blocker / "cache"), "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    expected = tiktoken.get_encoding(FALLBACK_ENCODING).encode_ordinary(SAMPLE)
    assert run.stdout.split(" ", 1) == [FALLBACK_ENCODING, f"{expected}\n"]


async def test_a_slow_encoding_is_waited_for_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Past the wait, requests count with the fallback at once (no second wait, one line),
    and the encoding is used once it has arrived."""
    real, arrive = tiktoken.get_encoding, threading.Event()

    class Slow:
        name = "slow_base"

        def encode_ordinary(self, text: str) -> list[int]:
            return [0] * len(text)

    def slow(name: str) -> Any:
        if name == "slow_base":
            arrive.wait(10)
            return Slow()
        return real(name)

    monkeypatch.setattr(tiktoken, "get_encoding", slow)
    monkeypatch.setattr("proxy.context.tokens._LOAD_WAIT_S", 0.2)
    counter = TokenCounter({"slow-model": "slow_base"})
    with caplog.at_level(logging.WARNING, logger="context_proxy.tokens"):
        first = await counter.encoder_for("slow-model")
        started = time.monotonic()
        second = await counter.encoder_for("slow-model")
        assert time.monotonic() - started < 0.1
    assert first.name == second.name == FALLBACK_ENCODING
    assert _warnings(caplog) == [
        f"encoding slow_base still loading after 0.2s; counting with {FALLBACK_ENCODING} meanwhile"
    ]
    arrive.set()
    for _ in range(100):
        if (await counter.encoder_for("slow-model")).name == "slow_base":
            break
        await asyncio.sleep(0.02)
    assert (await counter.encoder_for("slow-model")).name == "slow_base"


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


class _Counting:
    """An encoder of one token per character that counts the text it was given."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.chars = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.chars += len(text)
        return [0] * len(text)


def test_a_tool_list_is_tokenized_once_per_encoding_while_it_is_sent_again() -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "description": "x" * 5000}}]
    other = [{"type": "function", "function": {"name": "write_file", "description": "y" * 5000}}]
    first, second = _Counting("test-a"), _Counting("test-b")
    size = len(orjson.dumps(tools))
    assert request_overhead(first, tools) == 13 + size
    assert request_overhead(first, [dict(tool) for tool in tools]) == 13 + size  # equal, not the same object
    assert first.chars == size
    assert request_overhead(first, other) == 13 + len(orjson.dumps(other))
    assert request_overhead(second, tools) == 13 + size  # another encoding counts for itself
    assert (first.chars, second.chars) == (size + len(orjson.dumps(other)), size)


def test_the_tool_counts_keep_the_lists_used_last() -> None:
    from proxy.context.tokens import _SchemaCounts

    counts, encoder = _SchemaCounts(2), _Counting("test-c")
    for schemas in (b"[1]", b"[2]", b"[1]", b"[3]"):  # [2] is the least recently used when [3] comes
        counts.count(encoder, schemas)
    assert encoder.chars == 9
    counts.count(encoder, b"[1]")
    assert encoder.chars == 9
    counts.count(encoder, b"[2]")
    assert encoder.chars == 12


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


json_value = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
)
FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id", "refusal")


@settings(max_examples=300, deadline=None)
@given(
    message=st.dictionaries(st.sampled_from(FIELDS), json_value),
    part=json_value,
    call=st.dictionaries(st.sampled_from(("id", "type", "function")), json_value),
    function=st.dictionaries(st.sampled_from(("name", "arguments")), json_value),
)
def test_any_json_in_any_field_is_counted(
    message: dict[str, Any], part: Any, call: dict[str, Any], function: dict[str, Any]
) -> None:
    """An upstream's answer is not validated as a request is: counting never raises on it."""
    encoder = tiktoken.get_encoding(FALLBACK_ENCODING)
    for odd in (
        message,
        {**message, "content": [part]},
        {**message, "tool_calls": [call]},
        {**message, "tool_calls": [{**call, "function": function}]},
    ):
        assert count_message(encoder, odd) >= 3  # type: ignore[arg-type]


_ASCII_TEXT = st.lists(
    st.one_of(
        st.characters(min_codepoint=0, max_codepoint=127),
        st.sampled_from(
            ["'", "'S", "'ll", "'Ve", "'D", " the", "  ", "\r\n", "\n\n", "1234", "ABCdef", "Ab", "x/", "?!\n", "\t "]
        ),
        st.sampled_from("aZ"),
    ),
    max_size=40,
).map("".join)
"""ASCII text, every character (controls too) and the runs the patterns treat apart."""


def _with_pattern(pattern: str, name: str) -> Any:
    """The offline ranks under another encoding's pattern: its split is what is checked."""
    from proxy.context.tokens import _offline

    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (
            line.split()
            for line in (resources.files("tiktoken_ext") / "data" / "cl100k_base.tiktoken").read_bytes().splitlines()
            if line
        )
    }
    assert _offline().name == FALLBACK_ENCODING
    return tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def _o200k_pattern() -> str:
    """tiktoken's own o200k pattern (its ranks are not here: only the pattern is read)."""
    from unittest import mock

    import tiktoken_ext.openai_public as public

    with mock.patch.object(public, "load_tiktoken_bpe", return_value={}):
        return str(public.o200k_base()["pat_str"])


_O200K = None


@settings(max_examples=500, deadline=None)
@given(text=_ASCII_TEXT)
@example(text="  \x1f x\x1c\n\x0b  y  ")  # Python's `\\s` takes \x1c-\x1f, Unicode's does not
@example(text="I'Ll say it's 12345 o'CLOCK\r\n\n  ")
def test_ascii_text_counts_as_tiktoken_counts_it(text: str) -> None:
    """The split's pieces encode to tiktoken's very tokens (a wrong split may still count alike)."""
    from proxy.context.tokens import _ASCII_PATTERNS, _AsciiPieces, _offline

    global _O200K
    if _O200K is None:
        _O200K = _with_pattern(_o200k_pattern(), "o200k_split_check")
    for encoder in (_offline(), _O200K):
        pieces = _ASCII_PATTERNS[encoder._pat_str].findall(text)
        assert [t for piece in pieces for t in encoder._encode_single_piece(piece)] == encoder.encode_ordinary(text)
        counter = _AsciiPieces.of(encoder)
        assert counter is not None and counter.count(text) == len(encoder.encode_ordinary(text))


def test_counting_text_takes_the_quick_way_for_ascii_and_tiktoken_for_the_rest() -> None:
    from proxy.context.tokens import _PIECES, _offline, count_text

    encoder = _offline()
    code = (Path(__file__).parents[2] / "proxy" / "turn" / "service.py").read_text()
    assert code.isascii() and count_text(encoder, code) == len(encoder.encode_ordinary(code))
    assert _PIECES[encoder.name] is not None
    assert count_text(encoder, SAMPLE) == len(encoder.encode_ordinary(SAMPLE))  # not ASCII: tiktoken's own
    other = _with_pattern(r"\s+|\S+", "no_ascii_split")  # a pattern without an ASCII split: tiktoken's own
    assert count_text(other, "a  b c") == len(other.encode_ordinary("a  b c"))
    assert _PIECES[other.name] is None


def test_the_quick_count_rests_on_a_private_method_that_this_tiktoken_still_has() -> None:
    """`_AsciiPieces` encodes a piece with `Encoding._encode_single_piece`: if tiktoken drops it,
    counting falls back to `encode_ordinary` (slower, the same counts) and this test says so."""
    from proxy.context.tokens import _offline

    assert callable(getattr(_offline(), "_encode_single_piece", None))
    assert _offline()._encode_single_piece("hello") == _offline().encode_ordinary("hello")  # type: ignore[attr-defined]


def test_only_short_pieces_are_remembered() -> None:
    from proxy.context.tokens import _PIECE_CHARS, _AsciiPieces, _offline

    encoder = _offline()
    pieces = _AsciiPieces.of(encoder)
    assert pieces is not None
    long_run = "x" * (_PIECE_CHARS + 1)
    text = f"a {long_run} b"
    assert pieces.count(text) == pieces.count(text) == len(encoder.encode_ordinary(text))
    assert set(pieces._counts) == {"a", " b"}  # the run went through tiktoken, both times
