"""Zero-code for the apps people write: trimmed histories, changing system prompts, tool
calls re-serialized by frameworks, with and without a session id (reconcile rules 1-5)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import openai
import orjson
import pytest

from proxy.context.validity import CONTINUATION, MISSING_RESULT
from tests.conftest import Proxy, ProxyFactory
from tests.handlers.test_sessions import session_json

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


class App:
    """An app as written with the openai SDK: it keeps its own history and decides what to send."""

    def __init__(self, proxy: Proxy, session: str | None = None, model: str = "gpt-4o-mini") -> None:
        headers = {"X-Session-Id": session} if session else {}
        self.client: openai.AsyncOpenAI = proxy.client(default_headers=headers)
        self.proxy = proxy
        self.model = model
        self.history: list[dict[str, Any]] = []
        self.sessions: list[str] = []

    async def ask(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        raw = await self.client.chat.completions.with_raw_response.create(model=self.model, messages=messages, **kwargs)
        self.sessions.append(raw.headers["X-Session-Id"])
        message = raw.parse().choices[0].message.model_dump(exclude_none=True)
        message.pop("annotations", None)
        return message

    async def turn(self, text: str, *, system: dict[str, Any] = SYSTEM, keep: int | None = None) -> dict[str, Any]:
        """One user turn; with `keep`, only the last `keep` messages go out (a sliding window)."""
        self.history.append({"role": "user", "content": text})
        window = self.history if keep is None else self.history[-keep:]
        answer = await self.ask([system, *window])
        self.history.append(answer)
        return answer


def sent(proxy: Proxy) -> list[dict[str, Any]]:
    """What the model received for the last chat request."""
    return proxy.fake.chats[-1]["messages"]  # type: ignore[no-any-return]


def duplicates(messages: list[dict[str, Any]]) -> int:
    counts = Counter(orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages)
    return sum(n - 1 for n in counts.values())


async def journal(proxy: Proxy, session: str) -> dict[str, Any]:
    status, body = await session_json(proxy, session)
    assert status == 200, body
    return body  # type: ignore[no-any-return]


@pytest.mark.parametrize("keep", [4, 6, 10])
@pytest.mark.parametrize("named", [True, False], ids=["session-id", "derived"])
async def test_a_sliding_window_app_keeps_one_session_and_its_whole_history(
    start_proxy: ProxyFactory, keep: int, named: bool
) -> None:
    proxy = await start_proxy(strategy="summarize")
    app = App(proxy, f"slide-{keep}" if named else None, model="small-model")
    for n in range(40):
        await app.turn(f"question {n}: tell me about topic {n * 7 % 23}", keep=keep)
        upstream = sent(proxy)
        assert duplicates(upstream) == 0, f"turn {n}: a message went upstream twice"
        assert [m["role"] for m in upstream].count("system") == 1
        assert upstream[-1] == {"role": "user", "content": f"question {n}: tell me about topic {n * 7 % 23}"}
        assert CONTINUATION not in json.dumps(upstream)
    assert len(set(app.sessions)) == 1, "one session for the whole conversation"
    body = await journal(proxy, app.sessions[-1])
    turns = body["turns"]
    assert len(turns) == 40 and all(t["status"] == "completed" for t in turns)
    assert [t["input"] for t in turns] == [[app.history[2 * n]] for n in range(40)], "each turn: its one new message"
    last = sent(proxy)
    assert len(last) > keep + 1, "the model saw the session's history, not the app's trimmed window"
    assert "question 0:" in json.dumps(last), "the oldest turn is still there (verbatim or summarized)"


@pytest.mark.parametrize("named", [True, False], ids=["session-id", "derived"])
async def test_a_system_prompt_that_changes_every_turn_is_this_turns_and_never_multiplies(
    start_proxy: ProxyFactory, named: bool
) -> None:
    proxy = await start_proxy(strategy="full")
    app = App(proxy, "rag" if named else None)
    for n in range(10):
        system = {"role": "system", "content": f"Time: 2026-11-30T10:{n:02d}. Retrieved: doc-{n * 13 % 7}."}
        await app.turn(f"question {n}", system=system)
        upstream = sent(proxy)
        assert [m for m in upstream if m["role"] == "system"] == [system], "this turn's system prompt, once"
        assert duplicates(upstream) == 0 and len(upstream) == 2 * n + 2
    assert len(set(app.sessions)) == 1
    turns = (await journal(proxy, app.sessions[-1]))["turns"]
    assert [t["input"] for t in turns] == [[{"role": "user", "content": f"question {n}"}] for n in range(10)]
    assert turns[3]["system"][0]["content"].startswith("Time: 2026-11-30T10:03"), "the prompt is journaled"


@pytest.mark.parametrize("named", [True, False], ids=["session-id", "derived"])
async def test_a_handoff_swaps_the_system_prompt_once(start_proxy: ProxyFactory, named: bool) -> None:
    """openai-agents: triage hands off to billing through a tool call; billing's prompt from then on."""
    proxy = await start_proxy(strategy="full")
    app = App(proxy, "handoff" if named else None)
    triage = {"role": "system", "content": "You are triage. Hand billing questions to the billing agent."}
    billing = {"role": "system", "content": "You are the billing agent."}
    app.history.append({"role": "user", "content": "I was charged twice, call tool transfer_to_billing"})
    call = await app.ask([triage, *app.history])
    assert call["tool_calls"][0]["function"]["name"] == "transfer_to_billing"
    result = {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": '{"assistant": "billing"}'}
    app.history += [call, result]
    app.history.append(await app.ask([billing, *app.history]))
    for n in range(3):
        await app.turn(f"billing question {n}", system=billing)
    upstream = sent(proxy)
    assert [m for m in upstream if m["role"] == "system"] == [billing]
    assert duplicates(upstream) == 0 and MISSING_RESULT not in json.dumps(upstream)
    ids = [c["id"] for m in upstream for c in m.get("tool_calls", ())]
    assert len(ids) == len(set(ids)) == 1, "the handoff's call is sent once, with its real result"
    assert len(set(app.sessions)) == 1
    assert len((await journal(proxy, app.sessions[-1]))["turns"]) == 5


RESERIALIZED = {
    "compact": lambda args: json.dumps(args, separators=(",", ":")),  # pydantic-ai
    "spaced": lambda args: json.dumps(args, indent=2),
    "reordered": lambda args: json.dumps(dict(reversed(list(args.items())))),  # another framework's dump
}


@pytest.mark.parametrize("style", list(RESERIALIZED))
async def test_re_serialized_tool_calls_are_the_same_message(proxy: Proxy, style: str) -> None:
    app = App(proxy, f"tools-{style}")
    for n in range(4):
        app.history.append({"role": "user", "content": f"step {n}: call tool lookup"})
        call = await app.ask([SYSTEM, *app.history])
        function = call["tool_calls"][0]["function"]
        written = function["arguments"]
        function["arguments"] = RESERIALIZED[style](json.loads(written))
        assert function["arguments"] != written
        app.history += [call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": f"r{n}"}]
        app.history.append(await app.ask([SYSTEM, *app.history]))
        upstream_call = [m for m in sent(proxy) if m.get("tool_calls")][-1]
        assert upstream_call["tool_calls"][0]["function"]["arguments"] == written, "the journal's form goes upstream"
        assert duplicates(sent(proxy)) == 0
    body = await journal(proxy, f"tools-{style}")
    assert len(body["branches"]) == 1 and len(body["turns"]) == 8, "no branch, no duplicated turn"


async def test_an_app_that_replaces_old_turns_with_its_own_summary(proxy: Proxy) -> None:
    app = App(proxy, "own-summary")
    for n in range(6):
        await app.turn(f"fact {n}")
    own = {"role": "user", "content": "Summary of what we said so far: facts 0 to 3."}
    app.history = [own, *app.history[-4:]]
    await app.turn("fact 6")
    upstream = sent(proxy)
    assert own not in upstream, "the session's own history replaces the app's summary"
    assert "fact 0" in json.dumps(upstream) and duplicates(upstream) == 0
    turns = (await journal(proxy, "own-summary"))["turns"]
    assert len(turns) == 7 and turns[-1]["input"] == [{"role": "user", "content": "fact 6"}]


async def test_a_delta_client_that_says_the_same_thing_twice_gets_two_turns(proxy: Proxy) -> None:
    app = App(proxy, "twice")
    for text in ("Shall we start?", "yes", "yes"):
        await app.ask([{"role": "user", "content": text}])
    turns = (await journal(proxy, "twice"))["turns"]
    assert [t["parent"] for t in turns] == [-1, 0, 1], "three turns, one after the other"
    assert sent(proxy)[-2:] == [turns[1]["output"], {"role": "user", "content": "yes"}]


async def test_two_conversations_that_both_start_with_hi_stay_two_sessions(proxy: Proxy) -> None:
    first, second = App(proxy), App(proxy)
    for app in (first, second):
        await app.turn("Hi")
    for n in range(3):
        for app in (first, second):
            await app.turn(f"{'first' if app is first else 'second'} conversation, turn {n}")
    assert len(set(first.sessions)) == 1 and len(set(second.sessions)) == 1
    assert first.sessions[0] != second.sessions[0]
    for app in (first, second):
        assert len((await journal(proxy, app.sessions[0]))["turns"]) == 4


async def test_a_trimmed_window_that_overlaps_an_older_point_branches_there(proxy: Proxy) -> None:
    app = App(proxy, "trim-branch")
    for n in range(6):
        await app.turn(f"step {n}")
    # the app goes back: its window ends at step 3's answer, and it asks something else
    window = app.history[4:8]  # step 2, answer 2, step 3, answer 3
    await app.ask([SYSTEM, *window, {"role": "user", "content": "step 3b"}])
    body = await journal(proxy, "trim-branch")
    assert len(body["turns"]) == 7 and body["turns"][-1]["parent"] == 3, "attached after step 3"
    assert len(body["branches"]) == 2
    upstream = sent(proxy)
    assert "step 0" in json.dumps(upstream) and "step 4" not in json.dumps(upstream)


async def test_a_client_that_drops_the_system_prompt_gets_the_sessions_latest(proxy: Proxy) -> None:
    app = App(proxy, "no-system")
    other = {"role": "system", "content": "You answer in French."}
    await app.ask([SYSTEM, {"role": "user", "content": "one"}])
    await app.ask([other, {"role": "user", "content": "two"}])
    await app.ask([{"role": "user", "content": "three"}])
    assert [m for m in sent(proxy) if m["role"] == "system"] == [other], "the latest system prompt the session had"
