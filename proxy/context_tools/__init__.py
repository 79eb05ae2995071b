"""The proxy's own context tools: `recall_context`, `new_context` and the handoff notice.

`ContextTools` (`service.py`) shapes a turn's upstream request (the tools offered, the
notice) and reads its answer through `ToolRounds` (`rounds.py`), which answers the proxy's
calls itself so that the client never sees them.
"""
