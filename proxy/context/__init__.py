"""Context composition: tokens, budget, windows, strategies; pure, no Redis or HTTP."""

__all__: list[str] = []
