"""Shared fixtures. PostgreSQL tests need SYNOPSIS_TEST_POSTGRES_URL (scripts/test sets it)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# No test asserts a time (the brief): Hypothesis's per-example deadline and its too-slow check
# would fail a property test on a loaded machine, so neither applies anywhere.
settings.register_profile("synopsis", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("synopsis")


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After the architecture tests ran: the modules over the size guideline (not a failure:
    a reminder to split by concept, see tests/test_architecture.py)."""
    ran = any(
        report.nodeid.startswith("tests/test_architecture.py")
        for reports in terminalreporter.stats.values()
        for report in reports
        if hasattr(report, "nodeid")
    )
    if not ran:
        return
    from tests.test_architecture import GUIDE_MODULE_LINES, module_sizes

    over = module_sizes()
    terminalreporter.section(f"modules over the ~{GUIDE_MODULE_LINES}-line guideline: {len(over)}")
    for lines, module in over:
        terminalreporter.line(f"{lines:5d}  src/synopsis/{module}")
