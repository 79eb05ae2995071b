"""Optional OpenTelemetry traces, behind a tiny API that costs nothing when they are off.

`setup(env)` runs once at start-up: traces are on only when the `otel` extra is
installed and the standard variables ask for them (`OTEL_TRACES_EXPORTER` other than
`none`, or an `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`), and `OTEL_SDK_DISABLED` is not
`true`. The SDK reads the rest of the `OTEL_*` variables itself (service name,
sampler, exporter protocol and headers). Off, `span()` returns one shared no-op object
and `inject()` returns at once: about the cost of a `contextlib.nullcontext()` block.

On, the access middleware opens a server span per request (continuing a client's
`traceparent`), the turn opens child spans (`load`, `compaction`, `upstream`,
`record`), and the upstream client sends the current span's W3C `traceparent`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Protocol, Self

log = logging.getLogger("context_proxy.tracing")

Attribute = str | int | float | bool


class Span(Protocol):
    def set(self, key: str, value: Attribute | None) -> None: ...


class _NoSpan:
    """The span of a process without tracing: enters, exits and records nothing."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set(self, key: str, value: Attribute | None) -> None:
        return None


_NO_SPAN = _NoSpan()


class _Tracer:
    """OpenTelemetry's tracer and propagator, imported only when tracing is on."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry import propagate, trace

        self._trace = trace
        self._tracer = provider.get_tracer("context-proxy")
        self._propagate = propagate

    def span(self, name: str, attributes: Mapping[str, Attribute | None], parent: Mapping[str, str] | None) -> Any:
        context = self._propagate.extract(parent) if parent is not None else None
        kind = self._trace.SpanKind.SERVER if parent is not None else self._trace.SpanKind.INTERNAL
        clean = {k: v for k, v in attributes.items() if v is not None}
        return _OtelSpan(self._tracer.start_as_current_span(name, context=context, kind=kind, attributes=clean))

    def inject(self, headers: MutableMapping[str, str]) -> None:
        self._propagate.inject(headers)


class _OtelSpan:
    def __init__(self, manager: AbstractContextManager[Any]) -> None:
        self._manager = manager
        self._span: Any = None

    def __enter__(self) -> Self:
        self._span = self._manager.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self._manager.__exit__(kind, value, tb)

    def set(self, key: str, value: Attribute | None) -> None:
        if value is not None:
            self._span.set_attribute(key, value)


class _State:
    tracer: _Tracer | None = None


def enabled() -> bool:
    return _State.tracer is not None


def span(name: str, parent: Mapping[str, str] | None = None, **attributes: Attribute | None) -> Any:
    """A span as a context manager yielding an object with `set(key, value)`.

    `parent`: incoming headers (a server span continues their `traceparent`)."""
    tracer = _State.tracer
    if tracer is None:
        return _NO_SPAN
    return tracer.span(name, attributes, parent)


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current span's `traceparent` (and `tracestate`) to outgoing headers."""
    tracer = _State.tracer
    if tracer is not None:
        tracer.inject(headers)


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for traces."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def setup(env: Mapping[str, str]) -> bool:
    """Decide once, at start-up, whether spans are recorded; True when they are."""
    if not wanted(env):
        return False
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_* variables ask for traces but the otel extra is not installed: pip install -e '.[otel]'")
        return False
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "").strip()
    exporter = _exporter(env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp", protocol)
    if exporter is None:
        return False
    from opentelemetry import trace

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    use(provider)
    return True


def use(provider: Any) -> None:
    """Record spans with this `TracerProvider` (`setup` builds one; tests pass their own)."""
    _State.tracer = _Tracer(provider)


def stop() -> None:
    """Spans are no longer recorded (tests restore the no-op state)."""
    _State.tracer = None


def _exporter(name: str, protocol: str) -> Any:
    """The exporter `OTEL_TRACES_EXPORTER` names; OTLP over `OTEL_EXPORTER_OTLP_PROTOCOL` (http/protobuf by default)."""
    try:
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter()
        if name == "otlp" and protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

            return GrpcExporter()
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter()
    except ImportError:
        pass
    log.warning("no exporter for OTEL_TRACES_EXPORTER=%s (the otel extra has otlp and console); traces stay off", name)
    return None
