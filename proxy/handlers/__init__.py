"""HTTP adapters only: parse the request, call a service (`proxy.turn`), write the response."""

__all__: list[str] = []
