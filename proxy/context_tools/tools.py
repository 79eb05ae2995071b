"""The context tools the proxy serves itself: which to offer, and whose calls a model made.

Pure: no I/O. `recall_context` (one string parameter, `uri`) is offered while the
session has archived spans; `new_context` (no parameters) when configured. A client
that sends a tool of the same name keeps it: the proxy then neither offers nor
intercepts its own. A model's answer is split into the proxy's calls (answered by the
proxy, never shown to the client) and the client's (returned as they are).
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.config import ToolSettings
from proxy.context.window import FIRST_WINDOW
from proxy.types import JSONObject, Message, frozen

RECALL = "recall_context"
NEW_CONTEXT = "new_context"
NEW_CONTEXT_ANSWER = "Starting a new context window."
NOT_FOUND = "[not found]"

_DEFINITIONS: dict[str, JSONObject] = {
    RECALL: {
        "type": "function",
        "function": {
            "name": RECALL,
            "description": (
                "Fetch the full text of an earlier part of this conversation that was summarized to save space. "
                "Use it when the summary cites a context://archive/... URI and you need details it left out."
            ),
            "parameters": {
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "The context://archive/... URI as cited."}},
                "required": ["uri"],
                "additionalProperties": False,
            },
        },
    },
    NEW_CONTEXT: {
        "type": "function",
        "function": {
            "name": NEW_CONTEXT,
            "description": (
                "Close the current context window when a piece of work is finished: the earlier conversation is "
                "summarized before the next message. Write down anything you must keep before calling it."
            ),
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
}


@frozen
class ProxyTools:
    """The proxy's tools on one request, and the names the client claimed for itself."""

    names: tuple[str, ...]
    shadowed: tuple[str, ...] = ()
    max_rounds: int = 0

    @property
    def definitions(self) -> list[JSONObject]:
        return [_DEFINITIONS[name] for name in self.names]

    def __bool__(self) -> bool:
        return bool(self.names)


def offer(settings: ToolSettings, body: JSONObject, window_id: str) -> ProxyTools:
    """The tools to add to a request: `recall_context` once the window is past `win_0`
    (a compaction landed, so an archive exists), `new_context` when configured. None for
    a request asking for several choices or using the legacy `functions`."""
    wanted = []
    if settings.recall and window_id != FIRST_WINDOW:
        wanted.append(RECALL)
    if settings.new_context:
        wanted.append(NEW_CONTEXT)
    if not wanted or body.get("functions") or (body.get("n") or 1) != 1:
        return ProxyTools(())
    claimed = client_tool_names(body.get("tools"))
    names = tuple(n for n in wanted if n not in claimed)
    shadowed = tuple(n for n in wanted if n in claimed)
    return ProxyTools(names, shadowed, settings.max_rounds)


def client_tool_names(tools: object) -> set[str]:
    if not isinstance(tools, list):
        return set()
    names = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def with_tools(body: JSONObject, tools: ProxyTools) -> JSONObject:
    """The client's body with the proxy's tools appended to its own."""
    if not tools:
        return body
    return {**body, "tools": [*(body.get("tools") or ()), *tools.definitions]}


@frozen
class SplitCalls:
    proxy: list[JSONObject]
    client: list[JSONObject]


def split_calls(message: Message, names: Sequence[str]) -> SplitCalls:
    """The answer's tool calls: the proxy's (by name) and the client's, each in order."""
    calls = message.get("tool_calls") or []
    mine = [c for c in calls if _name(c) in names]
    return SplitCalls(mine, [c for c in calls if _name(c) not in names])


def _name(call: JSONObject) -> str:
    function = call.get("function")
    return str(function.get("name")) if isinstance(function, dict) else ""


def client_message(message: Message, client_calls: list[JSONObject]) -> Message:
    """The message the client gets: its own calls only (none: no `tool_calls` key)."""
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    if client_calls:
        out["tool_calls"] = client_calls
    return out


def round_messages(message: Message, proxy_calls: list[JSONObject], results: list[str]) -> list[Message]:
    """What one proxy round adds to the next upstream request: the model's message with
    only the proxy's calls, then one tool result per call."""
    call_message = {**client_message(message, []), "tool_calls": proxy_calls}
    tool_results: list[Message] = [
        {"role": "tool", "tool_call_id": call.get("id"), "content": result}
        for call, result in zip(proxy_calls, results, strict=True)
    ]
    return [call_message, *tool_results]


def add_usage(total: JSONObject | None, usage: JSONObject | None) -> JSONObject | None:
    """Usage summed over rounds: every integer field (nested detail counts too)."""
    if not usage:
        return total
    if total is None:
        return usage
    out = dict(total)
    for key, value in usage.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            out[key] = int(out.get(key) or 0) + value
        elif isinstance(value, dict):
            out[key] = add_usage(out.get(key) if isinstance(out.get(key), dict) else None, value)
    return out
