"""The upstream: the only package that speaks HTTP outward."""

from proxy.upstream.answer import Answer
from proxy.upstream.client import UpstreamClient, UpstreamResponse
from proxy.upstream.routes import Routes
from proxy.upstream.sse import SSEEvent, SSEParser, StreamAssembler, is_usage_only, parse_chunk

__all__ = [
    "Answer",
    "Routes",
    "SSEEvent",
    "SSEParser",
    "StreamAssembler",
    "UpstreamClient",
    "UpstreamResponse",
    "is_usage_only",
    "parse_chunk",
]
