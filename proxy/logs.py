"""Log lines an operator can use: text (the default) or one JSON object per line.

`configure(level, fmt)` installs the formatter on the root logger once, at start-up
(`serve --log-format`, else `server.log_format`). A structured line is logged with a
`Fields` message: text renders it as `key=value` pairs (values quoted when they hold
spaces, quotes or control characters, so a client cannot forge a line), JSON as
members of the line's object. Every other line is one line too: newlines in a message
are escaped, and `brief(exc)` keeps a foreign exception's text short.

The access line (`context_proxy.access`, INFO, one per request) and the start-up line
are built here; `handlers/access.py` logs the former, `cli.py` the latter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
import time
import traceback
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from proxy import __version__
from proxy.config import Settings

_BRIEF_CHARS = 160

Value = str | int | float | bool | None


class Fields:
    """A structured log message: an event name and its fields, rendered by the formatter."""

    __slots__ = ("event", "fields")

    def __init__(self, event: str, fields: Mapping[str, Value]) -> None:
        self.event = event
        self.fields = fields

    def __str__(self) -> str:
        return " ".join([self.event, *[f"{k}={_text(v)}" for k, v in self.fields.items()]])


def _text(value: Value) -> str:
    """A value as a text line shows it (the common types first: one access line has 21)."""
    if type(value) is not str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.1f}"
        if isinstance(value, int):
            return str(value)
    if value and value.isprintable() and not _unsafe(value):
        return value
    return orjson.dumps(value).decode()


def _unsafe(value: str) -> bool:
    """Whether `value` holds a character that gets a text value quoted (empty and unprintable
    values are quoted too): five scans in C, cheaper than a set test per character."""
    return " " in value or '"' in value or "'" in value or "=" in value or "\\" in value


def brief(exc: BaseException) -> str:
    """An exception as one short line: its class and the start of its first line."""
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    if len(first) > _BRIEF_CHARS or len(lines) > 1:
        first = first[:_BRIEF_CHARS] + "…"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")
        self._second = -1
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """logging's own stamp (`2026-01-31 12:00:00,123`), its seconds formatted once a second."""
        second = int(record.created)
        if second != self._second:
            self._second, self._stamp = second, time.strftime(self.default_time_format, self.converter(second))
        return f"{self._stamp},{int(record.msecs):03d}"

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = record.message.replace("\n", "\\n").replace("\r", "\\r")
        return super().formatMessage(record)

    def fields_line(self, created: float, level: str, name: str, message: Fields) -> str:
        """What `format` makes of a record of `message` (its text holds no newline: `_text`)."""
        second = int(created)
        if second != self._second:
            self._second, self._stamp = second, time.strftime(self.default_time_format, self.converter(second))
        return f"{self._stamp},{int((created - second) * 1000):03d} {level} {name} {message}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, a structured line's fields, the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        if isinstance(record.msg, Fields) and not record.args and not record.exc_info:
            return self.fields_line(record.created, record.levelname, record.name, record.msg)
        line: dict[str, Any] = {
            "time": _iso_time(record.created),
            "level": record.levelname,
            "logger": record.name,
        }
        if isinstance(record.msg, Fields) and not record.args:
            line["message"] = record.msg.event
            line.update(record.msg.fields)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["exc"] = "".join(traceback.format_exception(*record.exc_info))
        return orjson.dumps(line, default=str).decode()

    def fields_line(self, created: float, level: str, name: str, message: Fields) -> str:
        line = {"time": _iso_time(created), "level": level, "logger": name, "message": message.event}
        return orjson.dumps({**line, **message.fields}, default=str).decode()


def _iso_time(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The proxy's own handler: configuring again replaces it and nothing else; it writes
    to whatever `sys.stderr` is when a line is logged.

    Lines below WARNING logged while an event loop runs in the thread are written together at
    the end of the loop's turn (a write for up to 4 KB of access lines, not one each); any
    other line is written at once, after those before it."""

    def __init__(self) -> None:
        super().__init__()
        self._batch: list[str] = []
        self._flushing: asyncio.AbstractEventLoop | None = None
        """The loop a flush of the batch is scheduled on (one that closed before running it
        does not hold the next loop's lines back)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        return None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._batch.append(self.format(record) + self.terminator)
        except Exception:  # noqa: BLE001 (logging's own rule: logging a line never raises)
            self.handleError(record)
            return
        self._written(record.levelno)

    def info_line(self, name: str, message: Fields) -> None:
        """What `emit` does with an INFO record of `message` from logger `name`, without the record."""
        formatter = self.formatter
        assert isinstance(formatter, (TextFormatter, JsonFormatter))
        with self.lock:  # type: ignore[union-attr]
            try:
                self._batch.append(formatter.fields_line(time.time(), "INFO", name, message) + self.terminator)
            except Exception:  # noqa: BLE001 (as in `emit`)
                self.handleError(logging.makeLogRecord({"msg": message, "name": name}))
                return
            self._written(logging.INFO)

    def _written(self, levelno: int) -> None:
        loop = asyncio._get_running_loop()
        if loop is None or levelno >= logging.WARNING:  # a warning is not kept waiting
            self._write_batch()
        elif self._flushing is not loop:
            self._flushing = loop
            loop.call_soon(self.flush)

    def flush(self) -> None:
        # Reporting a failed write may fail too: a loop's callback that raised would be logged, and fail again.
        with self.lock, contextlib.suppress(Exception):  # type: ignore[union-attr]
            self._write_batch()
            self.stream.flush()

    def _write_batch(self) -> None:
        lines, self._batch, self._flushing = self._batch, [], None
        try:
            for chunk in _atomic_chunks(lines):
                self.stream.write(chunk)
                self.stream.flush()
        except Exception:  # noqa: BLE001 (as above)
            self.handleError(logging.makeLogRecord({"msg": "".join(lines)}))


_PIPE_BUF = 4096
"""What one write to a pipe keeps whole on Linux: workers share their stderr."""


def _atomic_chunks(lines: list[str]) -> Iterator[str]:
    """`lines` joined into writes of at most `_PIPE_BUF` bytes (a longer line goes alone), so
    another process's lines never land inside one."""
    chunk: list[str] = []
    size = 0
    for line in lines:
        length = len(line) if line.isascii() else len(line.encode())
        if chunk and size + length > _PIPE_BUF:
            yield "".join(chunk)
            chunk, size = [], 0
        chunk.append(line)
        size += length
    if chunk:
        yield "".join(chunk)


def log_info(logger: logging.Logger, message: Fields) -> None:
    """`logger.info(message)`; straight into the proxy's handler when it is the only one that
    would see the line (as `configure` sets logging up): no record is made, filtered and
    formatted, the same line results. Any other set-up (a handler or filter added on the way, a
    test's capture) gets the record, as always."""
    if not logger.isEnabledFor(logging.INFO):
        return
    handler = _sole_handler(logger)
    if handler is None:
        logger.info(message)
    else:
        handler.info_line(logger.name, message)


def _sole_handler(logger: logging.Logger) -> _Handler | None:
    """The proxy's handler on the root logger, if an INFO record of `logger` would reach it alone."""
    node: logging.Logger | None = logger
    while node is not None and node is not logging.root:
        if node.handlers or node.filters or not node.propagate:
            return None
        node = node.parent
    handlers = logging.root.handlers
    if node is None or logging.root.filters or len(handlers) != 1:
        return None
    handler = handlers[0]
    if type(handler) is not _Handler or handler.filters or handler.level > logging.INFO:
        return None
    return handler if isinstance(handler.formatter, (TextFormatter, JsonFormatter)) else None


def configure(level: str, fmt: str) -> None:
    """Send every log line to stderr in this format; called once by the command line.

    No line shows the caller's source file, thread or process, so a record does not
    collect them (logging's documented switches: one frame walk fewer per line)."""
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = _Handler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


_KEY_HASH = re.compile(r"[0-9a-f]{32,64}")


def short_tenant(tenant: str) -> str:
    """A tenant as a log shows it: a key's hash cut to 12 characters, a key name as it is."""
    return tenant[:12] if _KEY_HASH.fullmatch(tenant) else tenant


def redis_in_use(settings: Settings) -> str:
    """The Redis a proxy uses, with no password: a URL (a cluster's seed URLs, comma-separated),
    or the embedded server's socket."""
    url = settings.redis.url
    if url == "embedded":
        from proxy.store import EmbeddedRedis

        return f"embedded {EmbeddedRedis(settings.redis.data_dir).url}"
    return ",".join(_without_password(part.strip()) for part in url.split(","))


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def startup_fields(settings: Settings, config: str) -> Fields:
    """The start-up line: version, listening address, upstream, Redis, config file, strategy."""
    server = settings.server
    return Fields(
        "context-proxy started",
        {
            "version": __version__,
            "listen": f"http://{server.host}:{server.port}",
            "upstream": settings.upstream.base_url,
            "redis": redis_in_use(settings),
            "config": config,
            "strategy": ",".join(settings.context.strategy),
            "workers": server.workers,
        },
    )
