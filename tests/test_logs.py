"""Logs an operator can use: one access line per request (text or JSON), warnings with the
request id, a start-up line that says what runs, short lines for long foreign errors."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import openai
import orjson
import pytest

from proxy.config import settings_from_mapping
from proxy.context.tokens import TokenCounter
from proxy.errors import ConfigError
from proxy.events import UpstreamAnswered, log_event
from proxy.logs import Fields, JsonFormatter, TextFormatter, _Handler, brief, configure, log_info, redis_in_use
from tests.conftest import Proxy, ProxyFactory, make_settings
from tests.fake_upstream import FakeOpenAI


def _access(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "context_proxy.access"]


async def test_one_access_line_per_request_in_text_and_json(proxy: Proxy, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    client = proxy.client("sk-logged", default_headers={"X-Session-Id": "logged"})
    raw = await client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello log"}]
    )
    usage = raw.parse().usage
    assert usage is not None
    (record,) = _access(caplog)
    line = orjson.loads(JsonFormatter().format(record))
    assert line["level"] == "INFO" and line["message"] == "access"
    assert line["request_id"] == raw.headers["X-Request-Id"]
    assert (line["method"], line["path"], line["status"]) == ("POST", "/v1/chat/completions", 200)
    assert line["model"] == "gpt-4o-mini" and line["session"] == "logged"
    assert len(line["tenant"]) == 12 and "sk-logged" not in str(line)
    assert line["tokens_sent"] == int(raw.headers["X-Context-Tokens"])
    assert (line["prompt_tokens"], line["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)
    assert (line["strategy"], line["window"], line["compaction"], line["turn"]) == (
        "full",
        "win_0",
        "none",
        "completed",
    )
    assert line["ms"] >= line["upstream_ms"] > 0
    text = TextFormatter().format(record)
    assert f"request_id={raw.headers['X-Request-Id']} method=POST path=/v1/chat/completions status=200" in text
    assert f"session=logged tenant={line['tenant']} tokens_sent={line['tokens_sent']}" in text


async def test_every_request_gets_a_line_and_a_client_cannot_split_it(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with aiohttp.ClientSession() as http:
        body = {"model": 'evil"\nmodel= x', "messages": [{"role": "user", "content": "hi"}]}
        async with http.post(proxy.url + "/v1/chat/completions", json=body) as response:
            assert response.status == 404  # the upstream knows no such model
        async with http.get(proxy.url + "/healthz") as response:
            assert response.status == 200
    bad, health = _access(caplog)
    text = TextFormatter().format(bad)
    assert "\n" not in text
    assert 'model="evil\\"\\nmodel= x"' in text and "status=404" in text
    assert "path=/healthz status=200" in TextFormatter().format(health)


async def test_upstream_timeouts_warn_with_the_request_id(
    start_proxy: ProxyFactory, fake: FakeOpenAI, flushed_redis: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(flushed_redis, fake.url, strategy="full")  # type: ignore[attr-defined]
    proxy = await start_proxy(
        dataclasses.replace(settings, upstream=dataclasses.replace(settings.upstream, read_timeout_s=0.3))
    )
    with pytest.raises(openai.APIStatusError) as raised:
        await proxy.client().chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "stall after 0"}]
        )
    assert raised.value.status_code == 504
    request_id = raised.value.response.headers["X-Request-Id"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"upstream_timeout request={request_id} path=/v1/chat/completions" in warnings


def test_an_upstream_server_error_warns_and_an_answer_does_not(caplog: pytest.LogCaptureFixture) -> None:
    log_event(UpstreamAnswered("/v1/chat/completions", 200, 0.1, "req_ok"))
    log_event(UpstreamAnswered("/v1/chat/completions", 502, 0.1, "req_bad"))
    (warning,) = [r for r in caplog.records if r.name == "context_proxy.events"]
    assert warning.levelno == logging.WARNING and warning.getMessage() == "upstream answered 502 request=req_bad"


def test_a_text_line_quotes_exactly_the_values_that_need_it() -> None:
    plain = Fields("access", {"a": "x-1", "b": None, "c": 1.26, "d": 3, "e": True})
    assert str(plain) == "access a=x-1 b=- c=1.3 d=3 e=True"
    mixed = {"a": "x", "b": "two words", "c": "", "d": 'q"', "e": "k=v", "f": "\x1b", "g": "é", "h": 2.0}
    assert str(Fields("access", mixed)) == 'access a=x b="two words" c="" d="q\\"" e="k=v" f="\\u001b" g=é h=2.0'


def test_a_long_foreign_error_is_one_short_line(caplog: pytest.LogCaptureFixture) -> None:
    error = ValueError("Unknown encoding x.\nPlugins found: [" + "'plugin', " * 50 + "]\nmore")
    assert brief(error) == "ValueError: Unknown encoding x.…"
    TokenCounter()._load("no_such_encoding")
    (warning,) = [r for r in caplog.records if r.name == "context_proxy.tokens"]
    assert "\n" not in warning.getMessage() and len(warning.getMessage()) < 200


def test_redis_urls_are_shown_without_passwords(tmp_path: Path) -> None:
    shown = redis_in_use(settings_from_mapping({"redis": {"url": "redis://app:s3cret@cache:6380/2"}}))
    assert shown == "redis://app:***@cache:6380/2"
    seeds = {"url": "redis://:s3cret@a:7000, redis://:s3cret@b:7001", "cluster": True}
    assert redis_in_use(settings_from_mapping({"redis": seeds})) == "redis://:***@a:7000,redis://:***@b:7001"
    embedded = redis_in_use(settings_from_mapping({"redis": {"data_dir": str(tmp_path)}}))
    assert embedded == f"embedded unix://{tmp_path}/redis.sock"


def test_log_format_is_validated() -> None:
    assert settings_from_mapping({"server": {"log_format": "json"}}).server.log_format == "json"
    with pytest.raises(ConfigError, match="server.log_format: must be one of text, json, got 'xml'"):
        settings_from_mapping({"server": {"log_format": "xml"}})


def test_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0 and result.stdout.strip().startswith("context-proxy 0.")


def test_the_start_up_line_says_what_runs(tmp_path: Path, redis_url: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "proxy.yaml"
    config.write_text(
        f"server: {{port: {port}}}\nupstream: {{base_url: 'http://127.0.0.1:9/v1'}}\n"
        f"redis: {{url: '{redis_url}'}}\ncontext: {{strategy: [reset, summarize]}}\n"
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(config), "--log-format", "json"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stderr is not None
        for raw in serve.stderr:
            line = orjson.loads(raw)
            if line["message"] == "context-proxy started":
                break
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    assert line["version"].startswith("0.")
    assert line["listen"] == f"http://127.0.0.1:{port}"
    assert line["upstream"] == "http://127.0.0.1:9/v1"
    assert line["redis"] == redis_url
    assert line["config"] == str(config)
    assert line["strategy"] == "reset,summarize"


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What the proxy's handler writes to stderr, a string per write (`configure`d as `serve` does)."""
    writes: list[str] = []

    class Stderr:
        def write(self, text: str) -> None:
            writes.append(text)

        def flush(self) -> None:
            return None

    stderr = Stderr()
    monkeypatch.setattr(_Handler, "stream", property(lambda h: stderr, lambda h, v: None))  # pytest swaps sys.stderr
    for switch in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing"):  # `configure` turns them off
        monkeypatch.setattr(logging, switch, getattr(logging, switch))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure("info", "text")
    yield writes
    root.handlers[:] = handlers
    root.setLevel(level)


async def test_lines_of_one_loop_turn_go_out_in_one_write_and_others_at_once(written: list[str]) -> None:
    def said(write: str) -> list[str]:
        return [line.split("context_proxy.test ", 1)[1] for line in write.splitlines()]

    log = logging.getLogger("context_proxy.test")
    log.info("one")
    log.info("two")
    assert written == [], "not before the loop's turn ends"
    await asyncio.sleep(0)
    assert [said(w) for w in written] == [["one", "two"]]
    log.info("three")
    thread = threading.Thread(target=log.info, args=("from a thread",))  # no loop there: at once,
    thread.start()  # after the line that waits for the loop's turn
    thread.join()
    assert [said(w) for w in written] == [["one", "two"], ["three", "from a thread"]]


async def test_a_loop_that_closed_before_writing_its_lines_does_not_hold_back_the_next(written: list[str]) -> None:
    log = logging.getLogger("context_proxy.test")

    async def log_and_stop() -> None:
        log.info("first")
        asyncio.get_running_loop().stop()  # before the turn that would write it

    def other_loop() -> None:
        loop = asyncio.new_event_loop()
        loop.run_until_complete(log_and_stop())
        loop.close()

    thread = threading.Thread(target=other_loop)
    thread.start()
    thread.join()
    assert written == []
    log.info("second")
    await asyncio.sleep(0)
    assert len(written) == 1 and "first" in written[0] and "second" in written[0]


async def test_a_warning_goes_at_once_and_a_long_turn_in_writes_a_pipe_keeps_whole(written: list[str]) -> None:
    log = logging.getLogger("context_proxy.test")
    log.info("waits")
    log.warning("at once")
    assert len(written) == 1 and "waits" in written[0] and written[0].rstrip().endswith("at once")
    lines = [f"line {n} " + "é" * 150 for n in range(40)]  # 300 bytes each, twice their length
    for line in lines:
        log.info(line)
    await asyncio.sleep(0)
    writes = written[1:]
    assert len(writes) > 1 and all(len(w.encode()) <= 4096 and w.endswith("\n") for w in writes)
    assert [line.split("context_proxy.test ", 1)[1] for w in writes for line in w.splitlines()] == lines


@pytest.mark.parametrize("fmt", ["text", "json"])
async def test_a_line_written_straight_is_the_line_a_record_makes(
    written: list[str], fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure("info", fmt)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [h for h in root.handlers if isinstance(h, _Handler)])  # as `serve` has it
    log = logging.getLogger("context_proxy.access")
    message = Fields("access", {"request_id": "req_1", "status": 200, "ms": 1.25, "model": None, "error": "a b\nc"})
    with monkeypatch.context() as straight:
        straight.setattr(log, "makeRecord", None)  # no record is made
        log_info(log, message)
    kept: list[logging.LogRecord] = []
    catcher = logging.Handler()
    catcher.emit = kept.append  # type: ignore[method-assign]
    logging.getLogger("context_proxy").addHandler(catcher)  # another handler on the way: the record's way
    try:
        log_info(log, message)
    finally:
        logging.getLogger("context_proxy").removeHandler(catcher)
    assert [r.msg for r in kept] == [message]
    await asyncio.sleep(0)
    first, second = "".join(written).splitlines()
    if fmt == "json":
        first_line, second_line = orjson.loads(first), orjson.loads(second)
        assert first_line.pop("time")[:10] == second_line.pop("time")[:10]
        assert first_line == second_line
        assert first_line["error"] == "a b\nc" and first_line["model"] is None
    else:
        assert (
            first[24:]
            == second[24:]
            == 'INFO context_proxy.access access request_id=req_1 status=200 ms=1.2 model=- error="a b\\nc"'
        )
    log.setLevel(logging.WARNING)
    try:
        log_info(log, message)
    finally:
        log.setLevel(logging.NOTSET)
    await asyncio.sleep(0)
    assert len("".join(written).splitlines()) == 2, "a logger not enabled for INFO writes nothing"
