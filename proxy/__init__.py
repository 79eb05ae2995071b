"""context-proxy: an OpenAI-compatible gateway that manages conversation context."""

__all__ = ["__version__"]

__version__ = "0.2.0"
