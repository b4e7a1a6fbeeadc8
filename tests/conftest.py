"""Shared fixtures. PostgreSQL tests need SYNOPSIS_TEST_POSTGRES_URL (scripts/test sets it)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

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


@pytest.fixture
def pg_schema(postgres_url: str) -> Iterator[str]:
    """A fresh PostgreSQL schema name, dropped after the test; never the shared default."""
    import psycopg
    from psycopg import sql

    name = f"test_{uuid.uuid4().hex}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
