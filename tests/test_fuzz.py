"""Property-based fuzzing of the request path: bodies from OpenAI's chat completions schema,
valid and then broken, with odd headers and session ids.

For every request: no 5xx made by the proxy itself (the fake upstream marks its own
answers with `X-Fake-Upstream`), every 4xx the proxy makes is in OpenAI's error shape,
and the proxy still answers `/healthz`. A valid body is answered 200 by the upstream:
the proxy never makes it into one the upstream refuses. The proxy and the fake upstream
run on their own event loop in a thread; the client is a raw HTTP connection, so any
bytes and headers can be sent. A third test puts every JSON type (null, bool, number,
string, array, object) into every field of the request, of a message, of a content part
and of a tool call, at any depth, on every managed route: the path with and without a
session in it, with and without `X-Session-Id`. `CONTEXT_PROXY_FUZZ_EXAMPLES` sets the
number of examples (100 for each test by default).
"""

from __future__ import annotations

import asyncio
import copy
import http.client
import json
import math
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from proxy.app import create_app
from tests.conftest import make_settings
from tests.fake_upstream import MARK, FakeOpenAI

EXAMPLES = int(os.environ.get("CONTEXT_PROXY_FUZZ_EXAMPLES", "100"))

# The shapes below follow OpenAI's published schema for POST /chat/completions
# (CreateChatCompletionRequest and the ChatCompletionRequest*Message types).
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
name = st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)
call_id = st.from_regex(r"call_[A-Za-z0-9]{8}", fullmatch=True)
text_part = st.builds(lambda t: {"type": "text", "text": t}, text)
image_part = st.builds(
    lambda d: {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": d}},
    st.sampled_from(["auto", "low", "high"]),
)
user_content = st.one_of(text, st.lists(st.one_of(text_part, image_part), min_size=1, max_size=3))
pinned = st.fixed_dictionaries({}, optional={"pinned": st.booleans()})


def _message(role: str, content: Any, extra: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


system = st.builds(
    _message,
    st.sampled_from(["system", "developer"]),
    st.one_of(text, st.lists(text_part, min_size=1, max_size=2)),
    pinned,
)
user = st.builds(
    _message, st.just("user"), user_content, st.fixed_dictionaries({}, optional={"name": name, "pinned": st.booleans()})
)
assistant = st.builds(_message, st.just("assistant"), text, st.fixed_dictionaries({}, optional={"name": name}))


@st.composite
def tool_round(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An assistant message with tool calls, then one tool result per call."""
    ids = draw(st.lists(call_id, min_size=1, max_size=3, unique=True))
    calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": draw(name), "arguments": orjson.dumps({"q": draw(text)}).decode()},
        }
        for i in ids
    ]
    results = [{"role": "tool", "tool_call_id": i, "content": draw(text)} for i in ids]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


@st.composite
def conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = draw(st.lists(system, max_size=2))
    for _ in range(draw(st.integers(0, 3))):
        messages.append(draw(user))
        messages += draw(st.one_of(st.builds(lambda m: [m], assistant), tool_round()))
    messages.append(draw(user))
    return messages


tool = st.builds(
    lambda n, d: {
        "type": "function",
        "function": {
            "name": n,
            "description": d,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    },
    name,
    text,
)
options = st.fixed_dictionaries(
    {},
    optional={
        "temperature": st.floats(0, 2),
        "top_p": st.floats(0, 1),
        "max_tokens": st.integers(1, 500),
        "max_completion_tokens": st.integers(1, 500),
        "seed": st.integers(-(2**31), 2**31),
        "user": text,
        "stop": st.one_of(text, st.lists(text, max_size=4)),
        "tools": st.lists(tool, min_size=1, max_size=2),
        "tool_choice": st.sampled_from(["auto", "none"]),
        "response_format": st.just({"type": "text"}),
        "metadata": st.dictionaries(name, text, max_size=3),
        "logprobs": st.booleans(),
        "presence_penalty": st.floats(-2, 2),
    },
)


@st.composite
def valid_body(draw: st.DrawFn) -> dict[str, Any]:
    body = {"model": "gpt-4o-mini", "messages": draw(conversation()), **draw(options)}
    if draw(st.booleans()):
        body["stream"] = True
        if draw(st.booleans()):
            body["stream_options"] = {"include_usage": draw(st.booleans())}
    return body


json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def broken_body(draw: st.DrawFn) -> bytes:
    """A valid body with one thing broken, serialized (or not) to bytes."""
    body = draw(valid_body())
    messages = body["messages"]
    index = draw(st.integers(0, len(messages) - 1))
    message = messages[index]
    how = draw(
        st.sampled_from(
            ["field type", "drop field", "message field", "drop message field", "content part", "tool call",
             "huge", "many", "deep", "nan", "utf8", "truncate", "not json", "top type"]
        )
    )  # fmt: skip
    if how == "field type":
        body[
            draw(
                st.sampled_from(["model", "messages", "stream", "stream_options", "max_tokens", "temperature", "tools"])
            )
        ] = draw(json_value)
    elif how == "drop field":
        body.pop(draw(st.sampled_from(["model", "messages"])))
    elif how == "message field":
        message[draw(st.sampled_from(["role", "content", "name", "tool_call_id", "pinned", "tool_calls"]))] = draw(
            json_value
        )
    elif how == "drop message field":
        message.pop(draw(st.sampled_from(["role", "content"])), None)
    elif how == "content part":
        message["content"] = [draw(st.one_of(json_value, st.dictionaries(st.just("type"), json_value, max_size=1)))]
    elif how == "tool call":
        call = draw(st.dictionaries(st.sampled_from(["id", "type", "function"]), json_value, max_size=3))
        messages[index] = {"role": "assistant", "content": None, "tool_calls": [call]}
    elif how == "huge":
        message["content"] = "x" * draw(st.sampled_from([100_000, 2_000_000]))
    elif how == "many":
        body["messages"] = [{"role": "user", "content": "m"}] * draw(st.integers(500, 3000))
    elif how == "deep":
        depth = draw(st.integers(100, 5000))
        return b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":' + b"[" * depth + b"]" * depth + b"}]}"
    raw = json.dumps(body, ensure_ascii=False).encode()  # big integers and Infinity too
    if how == "nan":
        return raw.replace(b'"model"', b'"temperature":NaN,"model"', 1)
    if how == "utf8":
        at = draw(st.integers(0, len(raw)))
        return raw[:at] + b"\xff\xfe\xc3" + raw[at:]
    if how == "truncate":
        return raw[: draw(st.integers(0, len(raw) - 1))]
    if how == "not json":
        return draw(st.binary(max_size=50))
    if how == "top type":
        return json.dumps(draw(json_value)).encode()
    return raw


session_id = st.one_of(
    st.none(),
    st.from_regex(r"fz-[A-Za-z0-9._:@-]{1,40}", fullmatch=True),
    # any field value HTTP allows (DEL and other controls never reach the app: aiohttp's
    # parser answers a plain-text 400 first; see the README's known limits)
    st.text(st.characters(min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"), max_size=200),
)
odd_headers = st.fixed_dictionaries(
    {},
    optional={
        "Content-Type": st.sampled_from(
            ["text/plain", "application/x-www-form-urlencoded", "", "application/json; charset=latin-1"]
        ),
        "Content-Encoding": st.sampled_from(["gzip", "deflate", "br", "zstd", "identity", "bogus", "gzip, br"]),
        "X-Context-Strategy": st.sampled_from(
            ["off", "full", "reset,summarize", "background(anchored)", "nope", "background(", ""]
        ),
        "Authorization": st.sampled_from(["", "Bearer", "Bearer sk-other", "Basic Zm9vOmJhcg=="]),
    },
)


@dataclass(repr=False)
class Live:
    port: int
    fake: FakeOpenAI
    tally: Counter[tuple[str, int]] = field(default_factory=Counter)
    """(who answered, status) of every fuzzed request, printed at the end (`pytest -s`)."""

    def __repr__(self) -> str:
        return f"Live(port={self.port})"


@pytest.fixture(scope="module")
def live(redis_url: str) -> Iterator[Live]:
    """The proxy and the fake upstream, served from a thread with its own event loop."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runners: list[web.AppRunner] = []
    fake = FakeOpenAI()
    ports: list[int] = []

    async def serve(app: web.Application) -> int:
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def start() -> None:
        upstream = await serve(fake.app())
        settings = make_settings(redis_url, f"http://127.0.0.1:{upstream}/v1", strategy="full")
        settings = type(settings)(
            **{**settings.__dict__, "server": type(settings.server)(**{**settings.server.__dict__, "max_body_mb": 1.0})}
        )
        ports.append(await serve(create_app(settings)))
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    assert ready.wait(30)
    live = Live(ports[0], fake)
    yield live

    async def stop() -> None:
        for runner in reversed(runners):
            await runner.cleanup()

    print("\nfuzzed answers by (who, status):", dict(sorted(live.tally.items())))
    asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes


def _send(live: Live, path: str, body: bytes, headers: dict[str, str]) -> Answer:
    connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    try:
        connection.putrequest("POST", path, skip_accept_encoding=True)
        for key, value in {"Content-Type": "application/json", "Authorization": "Bearer sk-fuzz", **headers}.items():
            connection.putheader(key, value.encode("latin-1"))
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return Answer(response.status, response.headers, response.read())
    finally:
        connection.close()


def _path(session: str | None) -> str:
    if session is None:
        return "/v1/chat/completions"
    return "/s/" + quote(session, safe="") + "/v1/chat/completions"


def _check(live: Live, answer: Answer) -> None:
    """The invariants every answer keeps."""
    upstream_made = answer.headers.get(MARK) == "1"
    live.tally[("upstream" if upstream_made else "proxy", answer.status)] += 1
    if not upstream_made:
        assert answer.status < 500, f"the proxy answered {answer.status}: {answer.body[:300]!r}"
        if answer.status >= 400:
            error = orjson.loads(answer.body)["error"]
            assert isinstance(error["message"], str) and isinstance(error["type"], str), error
            assert set(error) == {"message", "type", "param", "code"}, error
            assert error["param"] is None or isinstance(error["param"], str)
            assert error["code"] is None or isinstance(error["code"], str)
    health = http.client.HTTPConnection("127.0.0.1", live.port, timeout=10)
    health.request("GET", "/healthz")
    assert health.getresponse().status == 200
    health.close()


def _is_whole(answer: Answer, stream: bool) -> bool:
    if not stream:
        return math.isfinite(len(orjson.loads(answer.body)["choices"]))
    return answer.body.rstrip().endswith(b"data: [DONE]")


fuzz = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)


@fuzz
@given(
    body=valid_body(), session=session_id.filter(lambda s: s is None or s.startswith("fz-")), use_header=st.booleans()
)
def test_a_valid_body_reaches_the_upstream_valid(
    live: Live, body: dict[str, Any], session: str | None, use_header: bool
) -> None:
    headers = {"X-Session-Id": session} if session and use_header else {}
    answer = _send(live, "/v1/chat/completions" if use_header else _path(session), orjson.dumps(body), headers)
    _check(live, answer)
    assert answer.status == 200, answer.body[:500]
    assert answer.headers.get(MARK) == "1"
    assert _is_whole(answer, bool(body.get("stream")))


@pytest.mark.timeout(max(600, EXAMPLES))
@fuzz
@given(raw=broken_body(), session=session_id, headers=odd_headers, in_path=st.booleans())
def test_a_broken_request_is_refused_cleanly(
    live: Live, raw: bytes, session: str | None, headers: dict[str, str], in_path: bool
) -> None:
    if session is not None and not in_path:
        headers = {**headers, "X-Session-Id": session}
    answer = _send(live, _path(session) if in_path else "/v1/chat/completions", raw, headers)
    _check(live, answer)


# Every field the proxy or the schema knows, by the kind of object it sits on; `typed_body`
# puts a value of any JSON type into one of them, or into any node already in the body.
FIELDS = {
    "body": ("model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "tools",
             "tool_choice", "n", "functions", "temperature", "user", "metadata", "stop", "response_format",
             "parallel_tool_calls", "seed", "logprobs"),
    "message": ("role", "content", "name", "tool_call_id", "tool_calls", "pinned", "refusal", "function_call",
                "audio"),
    "part": ("type", "text", "image_url"),
    "call": ("id", "type", "function"),
    "function": ("name", "arguments"),
    "stream_options": ("include_usage",),
}  # fmt: skip


_DEPTH = 12
"""How deep `typed_body` reaches: past the schema's deepest field (a tool call's function's
arguments are 5 levels down), into values it put there itself."""


def _nested(depth: int) -> Any:
    """An array `depth` levels deep (orjson reads 1024 levels but writes only 254)."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


of_type = st.sampled_from(["null", "bool", "number", "string", "array", "object"]).flatmap(
    lambda kind: {
        "null": st.none(),
        "bool": st.booleans(),
        "number": st.one_of(st.integers(), st.floats(allow_nan=False), st.sampled_from([0, -1, 2**63, 1e308])),
        "string": st.one_of(text, st.sampled_from(["", "user", "assistant", "tool", "text", "function", "call_1"])),
        "array": st.one_of(st.lists(json_value, max_size=3), st.integers(250, 600).map(_nested)),
        "object": st.dictionaries(st.one_of(text, st.sampled_from([k for ks in FIELDS.values() for k in ks])),
                                  json_value, max_size=3),
    }[kind]
)  # fmt: skip


def _kind(path: tuple[Any, ...]) -> str | None:
    """Which kind of object a path in a chat body leads to (None: one the schema does not name)."""
    if not path:
        return "body"
    if path == ("stream_options",):
        return "stream_options"
    if len(path) == 2 and path[0] == "messages":
        return "message"
    if len(path) == 4 and path[0] == "messages" and path[2] == "content":
        return "part"
    if len(path) == 4 and path[0] == "messages" and path[2] == "tool_calls":
        return "call"
    if len(path) == 5 and path[0] == "messages" and path[2] == "tool_calls" and path[4] == "function":
        return "function"
    return None


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every node of a JSON value (its own path first) down to `_DEPTH`, and every field its kind may have."""
    yield path
    if len(path) >= _DEPTH:
        return
    if isinstance(value, dict):
        for key in sorted({*value, *FIELDS.get(_kind(path) or "", ())}):
            yield from _places(value.get(key), (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _places(item, (*path, index))


def _put(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    *parents, last = path
    node = body
    for step in parents:
        node = node[step]
    node[last] = value
    return body


@st.composite
def typed_body(draw: st.DrawFn) -> Any:
    """A valid body with 1 to 3 places (at any depth) given a value of a drawn JSON type."""
    body: Any = copy.deepcopy(draw(valid_body()))  # its strategies may hand out shared values (`st.just`)
    if draw(st.booleans()):  # a tool call and a content part to reach into
        body["messages"].insert(0, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})  # fmt: skip
        body["messages"].insert(0, {"role": "user", "content": [{"type": "text", "text": "hi"}]})
    for _ in range(draw(st.integers(1, 3))):
        places = [p for p in _places(body) if p or draw(st.integers(0, 50)) == 0]
        if not places:
            break
        path = draw(st.sampled_from(places))
        try:
            body = _put(body, path, draw(of_type))
        except (KeyError, IndexError, TypeError):  # an earlier change took the path away
            continue
    return body


ROUTES = ["path", "path+header", "session path", "session path+header"]


@pytest.mark.timeout(max(600, EXAMPLES))
@fuzz
@given(body=typed_body(), route=st.sampled_from(ROUTES), session=st.from_regex(r"fz-[a-z0-9]{1,12}", fullmatch=True))
def test_any_json_type_in_any_field_is_never_a_proxy_5xx(live: Live, body: Any, route: str, session: str) -> None:
    headers = {"X-Session-Id": session} if route.endswith("+header") else {}
    path = _path(session if route.startswith("session") else None)
    _check(live, _send(live, path, json.dumps(body).encode(), headers))
