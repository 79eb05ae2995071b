"""HTTP handlers: the chat path, pass-through, the session API, health."""

__all__: list[str] = []
