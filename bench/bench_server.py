"""The service's cost: proxy overhead, and session API throughput on SQLite and PostgreSQL.

1. **Proxy overhead.** A fake OpenAI-compatible upstream (its own process) is called directly
   and through ``synopsis serve`` (another process), with the same chat-completions request
   (a 20-message history, below the compaction trigger), by 1, 10 and 50 concurrent clients.
   Reported: p50 and p99 latency of both paths, the added p50/p99 (proxy minus direct) and the
   throughput of each, all measured in the same run, the two paths alternating.
2. **Session API throughput.** Clients append two turns to a session and then ask for its
   context, over many sessions; one ``synopsis serve`` on SQLite, and one and two replicas on
   one PostgreSQL database (clients spread over the replicas).

Usage: ``bench_server.py [--quick] [--postgres-url URL] [--requests N] [--route ROUTE]``
(``chat``, ``responses`` or ``messages``). Prints Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
    deadline = time.monotonic() + 180  # LiteLLM takes long to start on a loaded machine
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
def process(command: Sequence[str], probe: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """Run ``command`` until the block ends; its log goes to a file, shown if it failed."""
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen(command, env=env or ENV, stdout=subprocess.DEVNULL, stderr=log)
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


class Connection:
    """One keep-alive HTTP/1.1 connection over asyncio streams: a load generator that spends
    far less CPU per request than httpx, so it takes less from the processes it measures."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> Connection:
        host, port = url.split("://", 1)[1].split("/", 1)[0].split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def post(self, request: bytes) -> int:
        """Send a prepared request; read the whole answer; return its status."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in lines
            if line.lower().startswith(b"content-length:")
        )
        await self.reader.readexactly(length)
        return int(lines[0].split()[1])

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


#: The request of each proxy route (``--route``): the same history in each API's shape.
ROUTES: dict[str, tuple[str, dict[str, object]]] = {
    "chat": ("chat/completions", {"model": "fake-model", "messages": HISTORY}),
    "responses": ("responses", {"model": "fake-model", "input": HISTORY}),
    "messages": (
        "messages",
        {"model": "claude-bench", "max_tokens": 64, "system": HISTORY[0]["content"],
         "messages": HISTORY[1:]},
    ),
}  # fmt: skip


def chat_request(url: str, key: str | None, route: str = "chat") -> bytes:
    """The bytes of the benchmark's POST of ``route`` to ``url`` (a ``.../v1`` base)."""
    host_port, _, base = url.split("://", 1)[1].partition("/")
    path, payload = ROUTES[route]
    body = json.dumps(payload).encode()
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (
        f"POST /{base}/{path} HTTP/1.1\r\nHost: {host_port}\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def chat_load(
    url: str, key: str | None, clients: int, per_client: int, route: str = "chat"
) -> Run:
    request = chat_request(url, key, route)
    connections = [await Connection.open(url) for _ in range(clients)]
    for connection in connections:  # warm up each connection
        await connection.post(request)
    errors = 0

    async def one_client(connection: Connection) -> list[float]:
        nonlocal errors
        times = []
        for _ in range(per_client):
            started = time.perf_counter()
            if await connection.post(request) != 200:
                errors += 1
                continue
            times.append(time.perf_counter() - started)
        return times

    started = time.perf_counter()
    results = await asyncio.gather(*(one_client(c) for c in connections))
    elapsed = time.perf_counter() - started
    for connection in connections:
        await connection.close()
    return Run([t for r in results for t in r], elapsed, errors)


def merged(runs: Sequence[Run]) -> Run:
    return Run(
        [t for r in runs for t in r.latencies],
        sum(r.seconds for r in runs),
        sum(r.errors for r in runs),
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


@dataclass(frozen=True)
class Variant:
    """One way to run the proxy: source tree, uvicorn's loop and parser, the upstream client
    under httpx (``httpx``: its own pool; ``default``: what the code picks), processes."""

    name: str
    src: Path
    loop: str = "uvloop"
    http: str = "httptools"
    transport: str = "default"
    processes: int = 1
    #: The key its clients send (None: the synopsis key of the run).
    key: str | None = None


#: The app the proxy variants serve (a module, so uvicorn's worker processes can import it).
APP_MODULE = """
import os
import httpx
from synopsis.server import ServerOptions, create_app

def make():
    try:  # claude-* models to the fake as an Anthropic upstream (code that has them)
        from synopsis.config import UpstreamSpec
        claude = (UpstreamSpec(name="claude", base_url=os.environ["BENCH_UP"],
                               format="anthropic", models=("claude-*",)),)
        extra = {"upstreams": claude}
    except ImportError:
        extra = {}
    options = ServerOptions(db=os.environ["BENCH_DB"], upstream=os.environ["BENCH_UP"], **extra)
    if os.environ["BENCH_TRANSPORT"] == "httpx":  # httpx's own pool, as before aiohttp
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256,
                              keepalive_expiry=4.0)
        transport = httpx.AsyncHTTPTransport(limits=limits)
        return create_app(options, upstream_transport=transport)
    return create_app(options)
"""


def proxy_process(variant: Variant, port: int) -> list[str]:
    """A command serving ``create_app`` as ``variant`` says (the same in old and new code)."""
    code = (
        "import uvicorn; "
        f"uvicorn.run('bench_proxy_app:make', factory=True, host='127.0.0.1', port={port}, "
        f"log_level='warning', access_log=False, loop={variant.loop!r}, "
        f"http={variant.http!r}, workers={variant.processes})"
    )
    return [sys.executable, "-c", code]


def descendants_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live children (uvicorn's worker processes)."""
    total = cpu_seconds(pid)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            total += cpu_seconds(int(stat.parent.name))
    return total


#: LiteLLM's proxy, from its own venv (``bench/make_litellm_venv.sh``), for ``--litellm``.
LITELLM = Path(__file__).resolve().parent / ".venv-litellm" / "bin" / "litellm"


def litellm_process(port: int, upstream: str, tmp: str) -> list[str]:
    """LiteLLM's proxy serving ``fake-model`` from the same fake upstream (no master key, no
    database: its lightest set-up; its own logging and telemetry off)."""
    config = Path(tmp) / "litellm.yaml"
    config.write_text(
        "model_list:\n  - model_name: fake-model\n    litellm_params:\n"
        f"      model: openai/fake-model\n      api_base: {upstream}\n      api_key: sk-fake\n"
        "litellm_settings:\n  telemetry: false\n  drop_params: true\n"
    )
    return [str(LITELLM), "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
            "--num_workers", "1"]  # fmt: skip


#: What `synopsis serve` runs (``server.options.UVICORN_HTTP``): httptools with the service's
#: head limits (``server.protocol``), uvloop, aiohttp under httpx.
SHIPPED_HTTP = "synopsis.server.protocol:BoundedHttpTools"
SHIPPED = "synopsis as shipped: httptools (bounded head) + uvloop, aiohttp"


def variants(
    baseline: Path | None, processes: Sequence[int], shipped_only: bool = False
) -> list[Variant]:
    if shipped_only:
        return [Variant(SHIPPED, SRC, http=SHIPPED_HTTP)]
    found = []
    if baseline is not None:
        found.append(Variant("before (baseline), h11 + asyncio", baseline, "asyncio", "h11"))
    found.append(Variant("now, h11 + asyncio, httpx pool", SRC, "asyncio", "h11", "httpx"))
    try:
        import httptools  # noqa: F401
        import httpx_aiohttp  # noqa: F401
        import uvloop  # noqa: F401
    except ImportError:
        print("(httptools, uvloop or httpx-aiohttp not installed: their variants are skipped)\n")
        return found
    found.append(Variant("now, httptools + uvloop, httpx pool", SRC, transport="httpx"))
    found.append(Variant("now, h11 + uvloop, aiohttp", SRC, http="h11"))
    found.append(Variant(SHIPPED, SRC, http=SHIPPED_HTTP))
    for n in processes:
        label = f"now, httptools + uvloop, aiohttp, {n} process{'es' if n > 1 else ''}"
        found.append(Variant(label, SRC, processes=n))
    return found


def proxy_overhead(
    requests: int, levels: Sequence[int], baseline: Path | None, processes: Sequence[int],
    route: str = "chat", shipped_only: bool = False, litellm: bool = False,
) -> None:  # fmt: skip
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}/v1"
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        db = str(Path(tmp) / "bench.db")
        key = create_key(db)
        (Path(tmp) / "bench_proxy_app.py").write_text(APP_MODULE)
        up_pid = stack.enter_context(process(fake_upstream(up_port), f"{upstream}/models"))
        proxies: list[tuple[Variant, str, int]] = []
        for variant in variants(baseline, processes, shipped_only):
            port = free_port()
            command = proxy_process(variant, port)
            path = f"{variant.src}{os.pathsep}{tmp}"
            env = {**ENV, "PYTHONPATH": path, "BENCH_DB": db, "BENCH_UP": upstream,
                   "BENCH_TRANSPORT": variant.transport}  # fmt: skip
            pid = stack.enter_context(process(command, f"http://127.0.0.1:{port}/healthz", env))
            proxies.append((variant, f"http://127.0.0.1:{port}/v1", pid))
        if litellm:
            if not LITELLM.exists():
                raise SystemExit(f"{LITELLM} is missing: run bench/make_litellm_venv.sh")
            port = free_port()
            master = f"sk-bench-{uuid.uuid4().hex}"  # its auth on, as a deployment runs it
            env = {**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False",
                   "LITELLM_MASTER_KEY": master}  # fmt: skip
            command = litellm_process(port, upstream, tmp)
            probe = f"http://127.0.0.1:{port}/health/liveliness"
            pid = stack.enter_context(process(command, probe, env))
            litellm_variant = Variant("LiteLLM proxy", SRC, key=master)
            proxies.append((litellm_variant, f"http://127.0.0.1:{port}/v1", pid))
        for clients in levels:
            _level(clients, max(requests // clients, 4), upstream, up_pid, key, proxies, route)


def _level(
    clients: int, per_client: int, upstream: str, up_pid: int, key: str,
    proxies: list[tuple[Variant, str, int]], route: str = "chat",
) -> None:  # fmt: skip
    """Direct and every proxy, alternating twice, then one table for this level."""
    runs: dict[str, list[Run]] = {"direct": []}
    cpu: dict[str, list[float]] = {}
    for _ in range(2):  # alternate, so drift hits every path alike
        direct = chat_load(upstream, None, clients, per_client, route)
        runs["direct"].append(asyncio.run(direct))
        for variant, url, pid in proxies:
            before = descendants_cpu(pid), cpu_seconds(up_pid), time.process_time()
            run = asyncio.run(chat_load(url, variant.key or key, clients, per_client, route))
            after = descendants_cpu(pid), cpu_seconds(up_pid), time.process_time()
            runs.setdefault(variant.name, []).append(run)
            sent = len(run.latencies) + run.errors + clients  # and one warm-up a client
            spent = [(a - b) / sent for a, b in zip(after, before, strict=True)]
            cpu.setdefault(variant.name, [0.0, 0.0, 0.0])
            cpu[variant.name] = [c + x / 2 for c, x in zip(cpu[variant.name], spent, strict=True)]
    d = merged(runs["direct"])
    print(f"\n**{clients} client{'s' if clients > 1 else ''}** (direct: p50 {ms(d.pct(0.5))}, "
          f"p99 {ms(d.pct(0.99))}, {d.rps:,.0f} req/s, {d.errors} errors)\n")  # fmt: skip
    print("| proxy | p50 | p99 | added p50 | added p99 | req/s | x direct req/s | "
          "CPU/req proxy / upstream / client | errors |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for variant, _, _ in proxies:
        p = merged(runs[variant.name])
        share = " / ".join(ms(x) for x in cpu[variant.name])
        print(f"| {variant.name} | {ms(p.pct(0.5))} | {ms(p.pct(0.99))} | "
              f"{ms(p.pct(0.5) - d.pct(0.5))} | {ms(p.pct(0.99) - d.pct(0.99))} | "
              f"{p.rps:,.0f} | {p.rps / d.rps:.2f} | {share} | {p.errors} |")  # fmt: skip


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
    parser.add_argument(
        "--baseline-src", type=Path, default=None,
        help="a src/ tree of an earlier commit, measured alongside (before/after in one run)",
    )  # fmt: skip
    parser.add_argument("--processes", default="1,2", help="server processes to measure")
    parser.add_argument(
        "--route", choices=sorted(ROUTES), default="chat",
        help="the proxy route measured: chat completions, Responses or Anthropic Messages",
    )  # fmt: skip
    parser.add_argument(
        "--shipped-only", action="store_true",
        help="measure only the proxy as `synopsis serve` runs it (not the other variants)",
    )  # fmt: skip
    parser.add_argument(
        "--litellm", action="store_true",
        help="also LiteLLM's proxy on the same fake upstream (bench/make_litellm_venv.sh first)",
    )  # fmt: skip
    args = parser.parse_args()
    requests = args.requests or (40 if args.quick else 2000)
    load = os.getloadavg()[0]
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
          f"{load:.1f}, {requests} requests per measurement\n")  # fmt: skip
    print(f"### Proxy overhead of /v1/{ROUTES[args.route][0]} (history below the trigger)\n")
    levels = [int(c) for c in args.clients.split(",")]
    processes = [int(n) for n in args.processes.split(",")]
    proxy_overhead(
        requests, levels, args.baseline_src, processes, args.route, args.shipped_only,
        args.litellm,
    )  # fmt: skip
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
