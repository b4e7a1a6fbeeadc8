"""Every command in ``docs/server.md`` runs, in order, against a real ``synopsis serve``.

Shell blocks run in bash (``set -euo pipefail``); the environment a block exports carries over
to the next block and to the Python blocks. A line starting with ``synopsis serve`` is started
in the background (and waited for), the rest of its block runs after it. What the test
changes, textually, so the commands work on a test machine:

* ``https://api.openai.com/v1`` becomes a fake OpenAI-compatible upstream;
* ports 8000-8002 become free ports (``synopsis serve`` without ``--port`` gets one);
* the example PostgreSQL URL becomes the test server's, with a fresh ``--schema``;
* ``curl -s`` becomes ``curl -sS --fail-with-body``, so an HTTP error fails the block.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from synopsis.server.testing import FakeUpstream, running
from tests.server.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "server.md"
EXAMPLE_PG = "postgresql://synopsis:secret@db.example.com/synopsis"
_BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.S | re.M)


def sections() -> dict[str, list[tuple[str, str]]]:
    """The doc's code blocks, ``(language, code)``, by ``##`` section title."""
    found: dict[str, list[tuple[str, str]]] = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)[1:]:
        title = part.splitlines()[0].strip()
        found[title] = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(part)]
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Reader:
    """Runs the doc's blocks with one environment and keeps the servers they start."""

    def __init__(self, workdir: Path, substitutions: dict[str, str], fake: FakeUpstream) -> None:
        self.workdir = workdir
        self.fake = fake
        self.substitutions = substitutions
        bin_dir = workdir / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "synopsis"
        shim.write_text(
            f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -c "
            f'"from synopsis.cli import main; main()" "$@"\n'
        )
        shim.chmod(0o755)
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT / "src"),
            "OPENAI_API_KEY": "sk-upstream-test",
        }
        self.servers: list[subprocess.Popen[bytes]] = []

    def adapt(self, code: str) -> str:
        for old, new in self.substitutions.items():
            code = code.replace(old, new)
        return code.replace("curl -s ", "curl -sS --fail-with-body ")

    def run_sh(self, code: str) -> str:
        """Run a block; its ``synopsis serve`` lines start servers where they stand."""
        code = self.adapt(code)
        outputs, script = [], []
        for line in code.replace("\\\n", " ").splitlines():
            if line.startswith("synopsis serve"):
                outputs.append(self._bash(script, code))
                script = []
                self.start(line)
            else:
                script.append(line)
        outputs.append(self._bash(script, code))
        return "".join(outputs)

    def _bash(self, lines: list[str], block: str) -> str:
        env_file = self.workdir / "env"
        body = "\n".join(["set -euo pipefail", *lines, f"env -0 > {env_file}"])
        done = subprocess.run(
            ["bash", "-c", body], cwd=self.workdir, env=self.env, capture_output=True,
            text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (
            f"{block}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
        pairs = (item.split("=", 1) for item in env_file.read_text().split("\0") if "=" in item)
        self.env = dict(pairs)
        return done.stdout

    def run_python(self, code: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", self.adapt(code)], cwd=self.workdir, env=self.env,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self, line: str) -> None:
        if "--port" not in line:
            line += f" --port {self.substitutions[':8000']}".replace(":", "")
        port = int(re.search(r"--port (\d+)", line).group(1))  # type: ignore[union-attr]
        command = ["bash", "-c", f"exec {line} --log-level warning"]
        server = subprocess.Popen(command, cwd=self.workdir, env=self.env)
        self.servers.append(server)
        wait_for(lambda: _healthy(port) or server.poll() is not None, what=f"port {port}")
        assert server.poll() is None, f"{line} exited with {server.returncode}"

    def stop(self) -> None:
        for server in self.servers:
            server.send_signal(signal.SIGTERM)
        for server in self.servers:
            server.wait(timeout=60)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    fake = FakeUpstream()
    with running(fake.app) as upstream:
        ports = {f":{p}": f":{free_port()}" for p in (8000, 8001, 8002)}
        substitutions = {
            "https://api.openai.com/v1": f"{upstream}/v1",
            **ports,
            **{f"--port {p[1:]}": f"--port {q[1:]}" for p, q in ports.items()},
        }
        docs = Reader(tmp_path, substitutions, fake)
        try:
            yield docs
        finally:
            docs.stop()


def test_the_sqlite_walkthrough_runs(reader: Reader) -> None:
    found = sections()
    outputs: list[str] = []
    for title in ("Start it", "Create a key", "Use the REST API", "Point the OpenAI client at it"):
        assert found[title], title
        for language, code in found[title]:
            run = reader.run_sh if language == "sh" else reader.run_python
            outputs.append(run(code))
    text = "\n".join(outputs)
    assert '"status":"ready"' in text
    assert '{"role":"system","content":"You plan trips."}' in text  # the context endpoint
    assert "Owns a red kayak" in text  # recall and export found the memory
    assert "echo: Which lake did we pick?" in text and "echo: Say hi" in text
    # The upstream and its key came from SYNOPSIS_UPSTREAM and SYNOPSIS_UPSTREAM_API_KEY.
    chats = [c for c in reader.fake.calls if c.path == "/v1/chat/completions"]
    assert chats and all(c.headers["authorization"] == "Bearer sk-upstream-test" for c in chats)


@pytest.mark.postgres
def test_the_replicas_walkthrough_runs(reader: Reader, postgres_url: str, pg_schema: str) -> None:
    reader.substitutions[EXAMPLE_PG] = postgres_url
    reader.substitutions['--db "$DB"'] = f'--db "$DB" --schema {pg_schema}'
    [(language, code)] = sections()["Run N replicas on PostgreSQL"]
    output = reader.run_sh(code)
    assert language == "sh" and len(reader.servers) == 2
    # The memory written through replica one, read back through replica two.
    assert output.count('"text":"written through replica one"') == 2


def test_the_redaction_example_runs(reader: Reader) -> None:
    """``--redact --redact-mode hash``: the values are gone, one token names the same address."""
    output = "".join(
        reader.run_sh(code) for _, code in sections()["Redact secrets and personal data"]
    )
    assert len(reader.servers) == 1
    assert "AKIAIOSFODNN7EXAMPLE" not in output and "ops@example.com" not in output
    answer = json.loads(output)
    first, second = (m["content"] for m in answer["messages"])
    email = re.search(r"\[EMAIL#[0-9a-f]{8}\]", first)
    assert email is not None and email.group() in second
    assert "[AWS_ACCESS_KEY#" in first
    assert answer["report"]["redacted"] == {"aws_access_key": 1, "email": 2}
