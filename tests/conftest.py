"""Shared fixtures. PostgreSQL tests need SYNOPSIS_TEST_POSTGRES_URL (scripts/test sets it)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a throwaway PostgreSQL server; skipped locally without one, fatal in CI."""
    url = os.environ.get("SYNOPSIS_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SYNOPSIS_REQUIRE_POSTGRES"):
            pytest.fail("SYNOPSIS_TEST_POSTGRES_URL is not set but PostgreSQL tests are required")
        pytest.skip("no PostgreSQL server (set SYNOPSIS_TEST_POSTGRES_URL or run scripts/test)")
    return url
