"""Context composition, pure (no Redis or HTTP): tokens, budget, windows, validity, compose."""

__all__: list[str] = []
