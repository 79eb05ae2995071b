"""One session that shows everything the inspector draws, driven through the proxy as an
app would: a leading system prompt, a pinned message, an edit that starts a branch, a
tool call and its result, a message holding markup, a failed turn, and enough turns on
the tiny model for two compactions."""

from __future__ import annotations

from typing import Any

import openai

from tests.conftest import Proxy

SYSTEM = {"role": "system", "content": "You are the keeper of facts. Never forget the user's name."}
PINNED = {"role": "user", "content": "Policy: my name is Ada; always answer in English.", "pinned": True}
MARKUP = 'Remember this snippet: <script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
EDITED = "Actually, a different second question: what is topic 7?"
MODEL = "tiny-model"


def filler(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"turn {n}: " + " ".join(f"fact{n}-{k} is topic {k * n % 97}" for k in range(4))}


async def build_session(proxy: Proxy, session: str, *, key: str = "sk-test", compactions: int = 2) -> list[str]:
    """Drive the session; returns the window id each request was answered in ("" when it failed)."""
    client = proxy.client(key, default_headers={"X-Session-Id": session})
    windows: list[str] = []

    async def ask(*messages: dict[str, Any]) -> Any:
        try:
            raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=list(messages))
        except openai.InternalServerError:
            windows.append("")
            return None
        windows.append(raw.headers["X-Context-Window-Id"])
        return raw.parse().choices[0].message

    first = await ask(SYSTEM, PINNED, filler(0))
    await ask(filler(1))
    # a full-history client edits the second question: a branch from turn 0, which the session continues
    await ask(
        SYSTEM, PINNED, filler(0), {"role": "assistant", "content": first.content}, {"role": "user", "content": EDITED}
    )
    call = (await ask({"role": "user", "content": "Find topic 7, call tool lookup"})).tool_calls[0]
    await ask({"role": "tool", "tool_call_id": call.id, "content": "lookup result: topic 7 is the tide tables"})
    await ask({"role": "user", "content": MARKUP})
    await ask({"role": "user", "content": "this one will fail 500"})
    n = 2
    while len({w for w in windows if w}) <= compactions and n < 200:
        await ask(filler(n))
        n += 1
    for _ in range(3):
        await ask(filler(n))
        n += 1
    return windows
