"""The service's cost: proxy overhead, and session API throughput on SQLite and PostgreSQL.

1. **Proxy overhead.** A fake OpenAI-compatible upstream (its own process) is called directly
   and through ``synopsis serve`` (another process), with the same chat-completions request
   (a 20-message history, below the compaction trigger), by 1, 10 and 50 concurrent clients.
   Reported: p50 and p99 latency of both paths, the added p50/p99 (proxy minus direct) and the
   throughput of each, all measured in the same run, the two paths alternating.
2. **Session API throughput.** Clients append two turns to a session and then ask for its
   context, over many sessions; one ``synopsis serve`` on SQLite, and one and two replicas on
   one PostgreSQL database (clients spread over the replicas).

Usage: ``bench_server.py [--quick] [--postgres-url URL] [--requests N]``. Prints Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = {**os.environ, "PYTHONPATH": str(SRC)}
HISTORY = [
    {"role": "system", "content": "You are a helpful travel planner."},
    *[
        {"role": ("user", "assistant")[i % 2],
         "content": f"Message {i}: let us plan the kayak trip, day {i}, with lunch by the lake."}
        for i in range(19)
    ],
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args} exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def process(command: Sequence[str], probe: str) -> Iterator[int]:
    """Run ``command`` until the block ends; its log goes to a file, shown if it failed."""
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_healthy(probe, child)
            yield child.pid
        finally:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
            log.seek(0)
            text = log.read().decode(errors="replace").strip()
            if text:
                print(f"<!-- log of {command[-1]}: {text[-2000:]} -->", file=sys.stderr)


def fake_upstream(port: int) -> list[str]:
    code = (
        "import uvicorn; from synopsis.server.testing import FakeUpstream; "
        f"uvicorn.run(FakeUpstream().app, host='127.0.0.1', port={port}, "
        "log_level='warning', access_log=False)"
    )
    return [sys.executable, "-c", code]


def synopsis_serve(port: int, *args: str) -> list[str]:
    return [sys.executable, "-c", "from synopsis.cli import main; main()", "serve",
            "--port", str(port), "--log-level", "warning", *args]  # fmt: skip


def create_key(db: str, schema: str = "synopsis") -> str:
    done = subprocess.run(
        [sys.executable, "-c", "from synopsis.cli import main; main()", "keys", "create",
         "--db", db, "--schema", schema, "--tenant", "bench"],
        env=ENV, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


# --- load ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    latencies: list[float]
    seconds: float
    errors: int = 0

    def pct(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(int(p * len(ordered)), len(ordered) - 1)]

    @property
    def rps(self) -> float:
        return len(self.latencies) / self.seconds


async def chat_load(url: str, key: str | None, clients: int, per_client: int) -> Run:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": "fake-model", "messages": HISTORY}
    limits = httpx.Limits(
        max_connections=clients, max_keepalive_connections=clients, keepalive_expiry=4.0
    )
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=60) as http:
        await http.post("/chat/completions", json=body)  # warm the connection

        errors = 0

        async def one_client() -> list[float]:
            nonlocal errors
            times = []
            for _ in range(per_client):
                started = time.perf_counter()
                try:
                    response = await http.post("/chat/completions", json=body)
                    response.raise_for_status()
                except httpx.HTTPError:
                    errors += 1
                    continue
                times.append(time.perf_counter() - started)
            return times

        started = time.perf_counter()
        results = await asyncio.gather(*(one_client() for _ in range(clients)))
        return Run([t for r in results for t in r], time.perf_counter() - started, errors)


def merged(runs: Sequence[Run]) -> Run:
    return Run(
        [t for r in runs for t in r.latencies],
        sum(r.seconds for r in runs),
        sum(r.errors for r in runs),
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def proxy_overhead(requests: int, levels: Sequence[int]) -> None:
    up_port, proxy_port = free_port(), free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        db = str(Path(tmp) / "bench.db")
        key = create_key(db)
        stack.enter_context(process(fake_upstream(up_port), f"{upstream}/models"))
        proxy = f"http://127.0.0.1:{proxy_port}"
        proxy_pid = stack.enter_context(
            process(synopsis_serve(proxy_port, "--db", db, "--upstream", upstream),
                    f"{proxy}/healthz")
        )  # fmt: skip
        print("| clients | direct p50 | direct p99 | proxy p50 | proxy p99 | added p50 | "
              "added p99 | direct req/s | proxy req/s | proxy CPU/req | errors |")  # fmt: skip
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for clients in levels:
            per_client = max(requests // clients, 4)
            direct: list[Run] = []
            proxied: list[Run] = []
            cpu = 0.0
            for _ in range(2):  # alternate, so drift hits both paths alike
                direct.append(asyncio.run(chat_load(upstream, None, clients, per_client)))
                before = cpu_seconds(proxy_pid)
                proxied.append(asyncio.run(chat_load(f"{proxy}/v1", key, clients, per_client)))
                cpu += cpu_seconds(proxy_pid) - before
            d, p = merged(direct), merged(proxied)
            print(f"| {clients} | {ms(d.pct(0.5))} | {ms(d.pct(0.99))} | {ms(p.pct(0.5))} | "
                  f"{ms(p.pct(0.99))} | {ms(p.pct(0.5) - d.pct(0.5))} | "
                  f"{ms(p.pct(0.99) - d.pct(0.99))} | {d.rps:,.0f} | {p.rps:,.0f} | "
                  f"{ms(cpu / len(p.latencies))} | {d.errors} / {p.errors} |")  # fmt: skip


async def cpu_per_request(requests: int) -> tuple[float, float]:
    """CPU seconds per request, direct and proxied, in one process over ASGI transports.

    CPU time (not wall time) of the whole path; the difference is what the proxy itself
    costs. It hardly depends on what else the machine runs.
    """
    from synopsis.server import ServerOptions, create_app
    from synopsis.server.testing import FakeUpstream

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "cpu.db")
        key = create_key(db)
        fake = FakeUpstream()
        app = create_app(
            ServerOptions(db=db, upstream="http://upstream/v1"),
            upstream_transport=httpx.ASGITransport(app=fake.app),
        )
        async with app.router.lifespan_context(app):
            direct = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=fake.app), base_url="http://upstream/v1"
            )
            proxied = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://proxy/v1",
                headers={"Authorization": f"Bearer {key}"},
            )  # fmt: skip
            costs = {"direct": [], "proxy": []}  # type: dict[str, list[float]]
            for _ in range(3):
                for name, client in (("direct", direct), ("proxy", proxied)):
                    costs[name].append(await _cpu(client, requests))
            await direct.aclose()
            await proxied.aclose()
    return min(costs["direct"]), min(costs["proxy"])


async def _cpu(client: httpx.AsyncClient, requests: int) -> float:
    body = {"model": "fake-model", "messages": HISTORY}
    for _ in range(10):
        await client.post("/chat/completions", json=body)
    started = time.process_time()
    for _ in range(requests):
        (await client.post("/chat/completions", json=body)).raise_for_status()
    return (time.process_time() - started) / requests


# --- sessions --------------------------------------------------------------------------------


async def session_load(urls: list[str], key: str, clients: int, rounds: int) -> Run:
    headers = {"Authorization": f"Bearer {key}"}
    https = [httpx.AsyncClient(base_url=u, headers=headers, timeout=60) for u in urls]
    run_id = uuid.uuid4().hex[:6]

    async def one_client(number: int) -> list[float]:
        http = https[number % len(https)]
        times = []
        for round_ in range(rounds):
            session = f"{run_id}-c{number}-s{round_ % 5}"
            turn = [{"role": "user", "content": f"question {round_} about kayaks"},
                    {"role": "assistant", "content": f"answer {round_} about lakes"}]  # fmt: skip
            started = time.perf_counter()
            appended = await http.post(f"/v1/sessions/u{number}/{session}/messages",
                                       json={"messages": turn})  # fmt: skip
            context = await http.get(f"/v1/sessions/u{number}/{session}/context")
            times.append(time.perf_counter() - started)
            appended.raise_for_status()
            context.raise_for_status()
        return times

    started = time.perf_counter()
    results = await asyncio.gather(*(one_client(n) for n in range(clients)))
    elapsed = time.perf_counter() - started
    for http in https:
        await http.aclose()
    return Run([t for r in results for t in r], elapsed)


def session_throughput(requests: int, postgres_url: str | None) -> None:
    clients = 10
    rounds = max(requests // clients, 4)
    print("| backend | replicas | clients | append+context pairs/s | p50 pair | p99 pair |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "sessions.db")
        _session_row("SQLite", db, "synopsis", 1, clients, rounds)
    if postgres_url:
        for replicas in (1, 2):
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            try:
                _session_row("PostgreSQL", postgres_url, schema, replicas, clients, rounds)
            finally:
                _drop_schema(postgres_url, schema)


def _session_row(name: str, db: str, schema: str, replicas: int, clients: int, rounds: int) -> None:
    key = create_key(db, schema)
    ports = [free_port() for _ in range(replicas)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    with ExitStack() as stack:
        for port, url in zip(ports, urls, strict=True):
            command = synopsis_serve(port, "--db", db, "--schema", schema)
            stack.enter_context(process(command, f"{url}/healthz"))
        run = asyncio.run(session_load(urls, key, clients, rounds))
    print(f"| {name} | {replicas} | {clients} | {run.rps:,.0f} | {ms(run.pct(0.5))} | "
          f"{ms(run.pct(0.99))} |")  # fmt: skip


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few requests (a smoke run)")
    parser.add_argument("--requests", type=int, default=None, help="requests per measurement")
    parser.add_argument("--postgres-url", default=None, help="also measure PostgreSQL")
    parser.add_argument("--clients", default="1,10,50", help="concurrency levels of the proxy run")
    parser.add_argument("--proxy-only", action="store_true", help="skip the session API run")
    args = parser.parse_args()
    requests = args.requests or (40 if args.quick else 2000)
    load = os.getloadavg()[0]
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{load:.1f}, {requests} requests per measurement\n")  # fmt: skip
    print("### Proxy overhead (history below the trigger)\n")
    proxy_overhead(requests, [int(c) for c in args.clients.split(",")])
    direct, proxied = asyncio.run(cpu_per_request(max(requests // 4, 20)))
    own = ms(proxied - direct)
    print(f"\nCPU per request, in one process over ASGI (best of 3): direct {ms(direct)}, "
          f"through the proxy {ms(proxied)}; the proxy's own cost {own}.")  # fmt: skip
    if args.proxy_only:
        return
    print("\n### Session API throughput (append two turns + build the context)\n")
    session_throughput(requests, args.postgres_url)


if __name__ == "__main__":
    main()
