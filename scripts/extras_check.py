"""What the docs promise for one install of synopsis, checked in a venv that has only it.

``python scripts/extras_check.py EXTRAS`` (``EXTRAS``: ``none``, one extra, or several joined
by commas) runs, in a fresh temporary directory, the commands and examples the README and
``docs/`` give for that install, against the installed package (never the checkout's
``src``): the README's command and every Python block of the README and of the pages that need
no extra on the plain install, ``synopsis serve`` on SQLite answering ``/healthz`` with
``server``, each adapter's example with its extra, and so on (see :data:`CHECKS`). A Python
block runs where every extra it needs (:func:`needs`) is installed, after the blocks before it
on its page, in one namespace. Standard library only; ``scripts/test-extras`` drives it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
#: Pages whose Python blocks run on the plain install (their adapters' pages are examples/).
PAGES = ("README.md", "docs/compaction.md", "docs/configuration.md", "docs/errors.md")
#: What in a block needs an extra: an import, or a provider's model spec.
NEEDS = (
    (re.compile(r"synopsis\.embeddings"), "embeddings"),
    (re.compile(r"[\"']openai:"), "openai"),
    (re.compile(r"[\"']anthropic:"), "anthropic"),
    (re.compile(r"[\"']litellm:"), "litellm"),
    (re.compile(r"synopsis\.server|fastapi"), "server"),
    (re.compile(r"postgresql://|PostgresStore\("), "postgres"),
)


def needs(block: str) -> frozenset[str]:
    """The extras a Python block needs."""
    return frozenset(extra for pattern, extra in NEEDS if pattern.search(block))


def run(*command: str, timeout: float = 300, **options: object) -> str:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, **options
    )  # type: ignore[call-overload]
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    return str(done.stdout)


def synopsis(*args: str) -> str:
    return run(str(Path(sys.executable).with_name("synopsis")), *args)


def blocks(extras: frozenset[str]) -> int:
    """Run every page's blocks that this install can run; the number run."""
    count = 0
    for page in PAGES:
        namespace: dict[str, object] = {"__name__": f"docs.{page}"}
        for number, block in enumerate(PYTHON_BLOCK.findall((ROOT / page).read_text()), 1):
            wanted = needs(block)
            if not wanted <= extras:
                continue
            exec(compile(block, f"{page} block {number}", "exec"), namespace)
            count += 1 if wanted == extras else 0
    return count


def readme_command() -> None:
    """The README's first command, on the example it names."""
    shutil.copytree(ROOT / "examples", "examples")
    synopsis("compact", "examples/coding-session.json", "--trigger-tokens", "2000", "-o", "c.json")
    assert Path("c.json.archive.jsonl").exists(), "the README says the archive is written"


def serve_sqlite() -> None:
    """``synopsis serve`` on its default database answers the probes."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(Path(sys.executable).with_name("synopsis")), "serve", "--db", "serve.db"]
    server = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert r.status == 200
                    return
            except OSError as exc:
                if server.poll() is not None or time.monotonic() > deadline:
                    error = server.communicate()[1]
                    raise SystemExit(f"synopsis serve did not answer: {error}") from exc
                time.sleep(0.3)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def server_keys() -> None:
    """docs/server.md's first step: a key for a tenant, on the default SQLite database."""
    key = synopsis("keys", "create", "--db", "serve.db", "--tenant", "acme").strip()
    assert key and "acme" in synopsis("keys", "list", "--db", "serve.db")


def tracing() -> None:
    """SessionMemory with OpenTelemetry's API alone (no SDK: its no-op provider)."""
    from opentelemetry import trace

    from synopsis import SessionMemory
    from synopsis.memory import InMemoryStore

    provider = trace.get_tracer_provider()
    with SessionMemory(store=InMemoryStore(), summarizer=None, tracer_provider=provider) as memory:
        memory.build_context("t", "u", "s", [{"role": "user", "content": "hi"}])


def postgres_memory() -> None:
    """``synopsis memory put`` and ``search`` on PostgreSQL (SYNOPSIS_TEST_POSTGRES_URL)."""
    url = os.environ.get("SYNOPSIS_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SYNOPSIS_REQUIRE_POSTGRES"):
            raise SystemExit("postgres: SYNOPSIS_TEST_POSTGRES_URL is not set")
        print("postgres: no SYNOPSIS_TEST_POSTGRES_URL, skipped")
        return
    tenant = f"extras-{os.getpid()}"
    synopsis("memory", "put", "--tenant", tenant, "--db", url, "--namespace", "user/u1", "手冲咖啡")
    found = synopsis("memory", "search", "--tenant", tenant, "--db", url, "--json", "咖啡")
    synopsis("memory", "delete-user", "--tenant", tenant, "--db", url, "u1")
    assert "手冲咖啡" in found, found


def resolves(spec: str) -> Callable[[], None]:
    def check() -> None:
        from synopsis import Compactor

        Compactor(model=spec, trigger_tokens=120_000)([{"role": "user", "content": "hi"}])

    check.__name__ = f"resolves {spec}"
    return check


def example(name: str) -> Callable[[], None]:
    def check() -> None:
        run(sys.executable, str(ROOT / "examples" / name), timeout=600)

    check.__name__ = f"examples/{name}"
    return check


def mcp_stdio() -> None:
    """``synopsis mcp`` answers an MCP client over stdio (raw JSON-RPC, one message a line):
    the handshake, the four tools, and a remember/recall round trip."""
    import json

    command = [str(Path(sys.executable).with_name("synopsis")), "mcp", "--db", "mcp.db"]
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(number: int, method: str, params: dict[str, object]) -> dict[str, object]:
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        server.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        answer: dict[str, object] = json.loads(server.stdout.readline())  # type: ignore[union-attr]
        if "result" not in answer:
            raise SystemExit(f"synopsis mcp answered {method} with {answer}")
        return answer["result"]  # type: ignore[return-value]

    try:
        client = {"name": "extras-check", "version": "1"}
        ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": client})  # fmt: skip
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        server.stdin.write("\n")
        tools = ask(2, "tools/list", {})["tools"]
        names = sorted(tool["name"] for tool in tools)  # type: ignore[attr-defined]
        if names != ["forget", "recall", "remember", "search_history"]:
            raise SystemExit(f"synopsis mcp lists {names}")
        ask(3, "tools/call", {"name": "remember", "arguments": {"text": "likes green tea"}})
        found = ask(4, "tools/call", {"name": "recall", "arguments": {"query": "tea"}})
        if "likes green tea" not in json.dumps(found):
            raise SystemExit(f"recall did not find the memory: {found}")
    finally:
        server.stdin.close()
        server.wait(timeout=60)


def tiktoken_count() -> None:
    shutil.copy(ROOT / "examples" / "coding-session.json", "session.json")
    synopsis("count", "session.json", "--estimator", "tiktoken", "--json")


CHECKS: dict[str, tuple[Callable[[], None], ...]] = {
    "none": (readme_command,),
    "server": (serve_sqlite, server_keys),
    "postgres": (postgres_memory,),
    "openai": (resolves("openai:gpt-4o-mini"),),
    "anthropic": (resolves("anthropic:claude-3-5-haiku-latest"),),
    "openai,anthropic": (),  # the README's library example names both
    "litellm": (resolves("litellm:gpt-4o-mini"),),
    "langchain": (example("langchain_agent.py"), example("search_history_langchain.py")),
    "langgraph": (example("langgraph_store.py"), example("search_history_langgraph.py")),
    "pydantic-ai": (example("pydantic_ai_history.py"), example("search_history_pydantic_ai.py")),
    "openai-agents": (
        example("openai_agents_session.py"),
        example("search_history_openai_agents.py"),
    ),
    "mcp": (mcp_stdio,),
    "embeddings": (),  # the README's embedder block
    "tiktoken": (tiktoken_count,),
    "otel": (tracing,),
}


def main(name: str) -> None:
    extras = frozenset() if name == "none" else frozenset(name.split(","))
    os.environ.setdefault("OPENAI_API_KEY", "sk-not-used")  # clients are built, never called
    os.environ.setdefault("ANTHROPIC_API_KEY", "not-used")
    with tempfile.TemporaryDirectory() as workdir:
        os.chdir(workdir)
        done = [check.__name__ for check in CHECKS[name] if check() is None]
        ran = blocks(extras)
    if not done and not ran:
        raise SystemExit(f"{name}: nothing to check")
    print(f"{name}: ok ({', '.join([*done, f'{ran} doc blocks'])})")


if __name__ == "__main__":
    main(sys.argv[1])
