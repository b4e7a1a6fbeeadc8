"""The rules a memory must meet, for code outside the stores that checks input first.

The command line, the service, the adapters and the configuration check a tenant, a page size,
a time to live or a whole item before any store sees it, with the same rules every backend
applies (so an input one refuses, all refuse, with the same message). The kinds and kind
filters have their own module, :mod:`synopsis.memory.kinds`. Pure; no I/O.
"""

from __future__ import annotations

import hashlib

from synopsis.memory._checks import MAX_LIMIT, MAX_TTL_SECONDS, check_tenant, prepare_memory
from synopsis.memory._types import normalize_tags, validate_tenant

__all__ = [
    "MAX_LIMIT",
    "MAX_TTL_SECONDS",
    "check_tenant",
    "default_key",
    "normalize_tags",
    "prepare_memory",
    "validate_tenant",
]


def default_key(kind: str, text: str) -> str:
    """A key derived from the content, so the same memory put twice is one memory."""
    digest = hashlib.sha256(f"{kind}\x00{text}".encode()).hexdigest()
    return f"sha256-{digest[:32]}"
