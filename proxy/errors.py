"""The errors the proxy itself raises; one middleware turns each into OpenAI's error JSON.

Every class carries the HTTP status, the OpenAI `type` and an optional `code` and
`param`. Upstream error responses are never wrapped in these: they reach the client
unchanged.
"""

from __future__ import annotations


class ProxyError(Exception):
    """Base of every error answered in OpenAI's shape."""

    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def body(self) -> dict[str, dict[str, str | None]]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class BadRequest(ProxyError):
    """The request is malformed: bad JSON, a missing or mistyped field."""

    status = 400
    type = "invalid_request_error"


class BudgetExceeded(BadRequest):
    """Even a compacted context cannot fit the model's window."""

    code = "context_length_exceeded"


class NotFound(ProxyError):
    """A session or route that does not exist for this caller."""

    status = 404
    type = "invalid_request_error"
    code = "not_found"


class InvalidApiKey(ProxyError):
    """No gateway key, or one the gateway does not know."""

    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class ModelNotAllowed(ProxyError):
    """The gateway key's allow-list does not cover the requested model."""

    status = 403
    type = "invalid_request_error"
    code = "model_not_allowed"


class RateLimited(ProxyError):
    """A gateway key's rpm or tpm is spent for the rolling minute; `type` says which."""

    status = 429
    type = "requests"
    code = "rate_limit_exceeded"

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.type = limit


class QuotaExceeded(ProxyError):
    """A gateway key's token budget is spent until its period turns."""

    status = 429
    type = "insufficient_quota"
    code = "insufficient_quota"


class PayloadTooLarge(ProxyError):
    """The request body is over `server.max_body_mb`."""

    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class ContextBuilderFailed(ProxyError):
    """The configured `context.builder` raised or returned something that is not a list of messages."""

    status = 500
    type = "server_error"
    code = "context_builder_failed"


class Conflict(ProxyError):
    """The session changed while the request was being applied (trying again may succeed), or a
    gateway key of that name exists or comes from the config."""

    status = 409
    type = "invalid_request_error"
    code = "conflict"


class UnsupportedMediaType(ProxyError):
    """The body is in a `Content-Encoding` the proxy cannot read (only gzip and deflate)."""

    status = 415
    type = "invalid_request_error"
    code = "unsupported_content_encoding"


class StoreUnavailable(ProxyError):
    """Redis cannot be reached; nothing was written."""

    status = 503
    type = "server_error"
    code = "store_unavailable"


class UpstreamUnavailable(ProxyError):
    """The upstream could not be reached or closed the connection."""

    status = 502
    type = "server_error"
    code = "upstream_unavailable"


class UpstreamTimeout(ProxyError):
    """The upstream did not answer within `upstream.timeout_s`."""

    status = 504
    type = "server_error"
    code = "upstream_timeout"


class ConfigError(Exception):
    """A config file that cannot be used; the message names the key path."""
