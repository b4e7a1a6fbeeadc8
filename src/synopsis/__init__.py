"""synopsis: keep LLM agents working past their context window, and remember earlier sessions."""

from synopsis.errors import (
    AllModelsFailed,
    CompactionError,
    ConfigError,
    ContextLengthExceeded,
    InvalidInput,
    InvalidMessage,
    InvalidNamespace,
    InvalidSummary,
    ModelError,
    ModelTimeout,
    NotFound,
    PermanentModelError,
    ProviderUnavailable,
    RateLimited,
    RetryExhausted,
    StoreError,
    SynopsisError,
    TenantMismatch,
    TransientModelError,
)

__version__ = "0.1.0"

__all__ = [
    "AllModelsFailed",
    "CompactionError",
    "ConfigError",
    "ContextLengthExceeded",
    "InvalidInput",
    "InvalidMessage",
    "InvalidNamespace",
    "InvalidSummary",
    "ModelError",
    "ModelTimeout",
    "NotFound",
    "PermanentModelError",
    "ProviderUnavailable",
    "RateLimited",
    "RetryExhausted",
    "StoreError",
    "SynopsisError",
    "TenantMismatch",
    "TransientModelError",
]
