"""Optional OpenTelemetry: a server span per request with child spans for the turn's steps,
the W3C `traceparent` continued from the client and sent upstream; nothing when off.

Runs with the SDK's in-memory exporter; skipped where the otel packages are absent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from proxy import tracing
from tests.conftest import Proxy

sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = "00f067aa0ba902b7"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    yield exporter
    tracing.stop()


def tree(finished: Any) -> list[str]:
    """The spans as an indented tree, children in start order."""
    children: dict[int | None, list[Any]] = {}
    ids = {s.context.span_id for s in finished}
    for s in sorted(finished, key=lambda s: s.start_time):
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        children.setdefault(parent, []).append(s)

    def walk(parent: int | None, depth: int) -> list[str]:
        lines = []
        for s in children.get(parent, []):
            attributes = " ".join(f"{k}={v}" for k, v in sorted(s.attributes.items()))
            lines.append("  " * depth + f"{s.name} [{(s.end_time - s.start_time) / 1e6:.2f} ms] {attributes}")
            lines += walk(s.context.span_id, depth + 1)
        return lines

    return walk(None, 0)


async def test_a_managed_request_is_one_trace_continued_upstream(proxy: Proxy, spans: InMemorySpanExporter) -> None:
    client = proxy.client(
        default_headers={"X-Session-Id": "traced", "traceparent": f"00-{CLIENT_TRACE}-{CLIENT_PARENT}-01"}
    )
    answer = await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "trace"}])
    finished = spans.get_finished_spans()
    print("\n".join(tree(finished)))
    by_name = {s.name: s for s in finished}
    server = by_name["POST /v1/chat/completions"]
    assert format(server.context.trace_id, "032x") == CLIENT_TRACE
    assert server.parent is not None and format(server.parent.span_id, "016x") == CLIENT_PARENT
    for step in ("load", "compaction", "upstream", "record"):
        assert by_name[step].parent is not None and by_name[step].parent.span_id == server.context.span_id, step
        assert by_name[step].context.trace_id == server.context.trace_id
    assert answer.usage is not None
    assert server.attributes["session.id"] == "traced"
    assert server.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert server.attributes["context.strategy"] == "full"
    assert server.attributes["gen_ai.usage.input_tokens"] == answer.usage.prompt_tokens
    assert server.attributes["context.tokens_sent"] > 0
    assert by_name["compaction"].attributes["context.compaction"] == "none"
    sent = proxy.fake.headers[-1]["traceparent"]
    upstream = by_name["upstream"].context
    assert sent == f"00-{CLIENT_TRACE}-{format(upstream.span_id, '016x')}-01"


async def test_off_means_no_spans_and_no_header(proxy: Proxy) -> None:
    assert not tracing.enabled()
    assert tracing.span("load", session="s") is tracing.span("record")  # one shared no-op
    await proxy.client().chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "quiet"}])
    assert "traceparent" not in {k.lower() for k in proxy.fake.headers[-1]}


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_the_standard_variables_decide(env: dict[str, str], wanted: bool) -> None:
    assert tracing.wanted(env) is wanted
