"""One tenant's hung upstream calls must not stall another tenant (issue 19, finding 2).

A fake upstream whose model ``hang`` never answers (its count of open, hanging calls read at
``/fake/stats``), ``synopsis serve`` and this load client each run in their own process.
Tenant A sends N (default 300) chat-completions requests to ``hang``, each client giving up after
``--give-up`` seconds (3). While they are pending, tenant B sends requests one after another
to a model that answers; each must succeed within 1 s (the goal). After A's clients gave up,
the upstream must see its calls abandoned (the proxy cancelled them), and B is measured again.

Reported: how many of A's requests were refused with 429 (over ``--upstream-concurrency``)
and how many reached the upstream, B's latencies while A hangs and after, the upstream calls
still open after A gave up. Usage: ``bench_hung_upstream.py [--hung 300] [--concurrency 64]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_server import ENV, free_port, process, synopsis_serve

HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def key_for(db: str, tenant: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "from synopsis.cli import main; main()", "keys", "create",
         "--db", db, "--tenant", tenant],
        env=ENV, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


#: Tenant B's client, in a process of its own: measured from the load client's process, B's
#: request waited for that client's event loop, busy sending A's 300 requests (most of the
#: 2 s once reported for "B during the burst"). It starts, opens its connection, then sends
#: ``n`` requests for each line ``n`` it reads and prints their latencies (JSON).
B_CLIENT = """
import json, sys, time, httpx
url, key = sys.argv[1], sys.argv[2]
hi = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
    c.get("/healthz")
    print("ready", flush=True)
    for line in sys.stdin:
        out = []
        for _ in range(int(line)):
            started = time.perf_counter()
            status = c.post("/v1/chat/completions", json=hi).status_code
            out.append(time.perf_counter() - started if status == 200 else -status)
        print(json.dumps(out), flush=True)
"""


class TenantB:
    """Tenant B's client process (see :data:`B_CLIENT`)."""

    def __init__(self, child: asyncio.subprocess.Process) -> None:
        self.child = child

    @classmethod
    async def start(cls, url: str, key: str) -> TenantB:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", B_CLIENT, url, key, env=ENV,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert child.stdout is not None
        if (await child.stdout.readline()).strip() != b"ready":
            raise SystemExit("tenant B's client did not start")
        return cls(child)

    async def measure(self, count: int) -> list[float]:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write(f"{count}\n".encode())
        await self.child.stdin.drain()
        latencies = [float(x) for x in json.loads(await self.child.stdout.readline())]
        if any(x < 0 for x in latencies):
            raise SystemExit(f"tenant B got an error status: {latencies}")
        return latencies

    async def close(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        await self.child.wait()


class Fake:
    """The fake upstream's counters, over HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url

    def stats(self) -> dict[str, int]:
        return dict(httpx.get(f"{self.url}/fake/stats", timeout=10).json())

    @property
    def hanging(self) -> int:
        return self.stats()["hanging"]

    @property
    def abandoned(self) -> int:
        return self.stats()["abandoned"]


def fake_upstream(port: int) -> list[str]:
    code = (
        "import uvicorn; from synopsis.server.testing import FakeUpstream; "
        f"uvicorn.run(FakeUpstream(hang_seconds=120).app, host='127.0.0.1', port={port}, "
        "log_level='warning', access_log=False)"
    )
    return [sys.executable, "-c", code]


async def scenario(
    url: str, key_a: str, key_b: str, fake: Fake, args: argparse.Namespace
) -> dict[str, object]:
    b = await TenantB.start(url, key_b)
    try:
        return await _scenario(url, key_a, b, fake, args)
    finally:
        await b.close()


async def _scenario(
    url: str, key_a: str, b: TenantB, fake: Fake, args: argparse.Namespace
) -> dict[str, object]:
    limits = httpx.Limits(max_connections=args.hung + 10)
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key_a}"}, timeout=args.give_up,
        limits=limits,
    ) as a:  # fmt: skip

        async def hung() -> str:
            try:
                response = await a.post("/v1/chat/completions", json={**HI, "model": "hang"})
            except httpx.TimeoutException:
                return "gave up"
            return str(response.status_code)

        calls = [asyncio.ensure_future(hung()) for _ in range(args.hung)]
        started = time.perf_counter()
        await asyncio.sleep(0.05)  # A's requests are on their way: B's goes in among them
        early = await b.measure(1)
        early_done = sum(c.done() for c in calls)
        plateau = min(args.hung, args.concurrency)
        # The fake's counters are read in a thread: a blocking read here would stall A's calls.
        while (  # noqa: ASYNC110
            await asyncio.to_thread(lambda: fake.hanging) < plateau
            and time.perf_counter() - started < args.give_up / 2
        ):
            await asyncio.sleep(0.02)
        reached = await asyncio.to_thread(lambda: fake.hanging)
        settled = time.perf_counter() - started
        burst = await b.measure(1)  # the refusals may still be on their way
        refused = args.hung - plateau
        stop = started + args.give_up / 2
        while sum(c.done() for c in calls) < refused and time.perf_counter() < stop:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        answered = time.perf_counter() - started
        during = await b.measure(args.samples)
        outcomes = await asyncio.gather(*calls)
    for _ in range(100):  # up to 10 s for the upstream to see the calls closed
        if await asyncio.to_thread(lambda: fake.hanging) == 0:
            break
        await asyncio.sleep(0.1)
    after = await b.measure(args.samples)
    return {
        "refused_429": outcomes.count("429"),
        "gave_up": outcomes.count("gave up"),
        "reached_upstream": reached,
        "seconds_to_reach_it": round(settled, 2),
        "seconds_until_the_rest_got_429": round(answered, 2),
        "B sent 50 ms into the burst (ms)": round(early[0] * 1000, 1),
        "A's calls answered when B's came back": early_done,
        "B once A's calls reach the upstream (ms)": round(burst[0] * 1000, 1),
        "abandoned_upstream": fake.abandoned,
        "open_after": fake.hanging,
        "during": during,
        "after": after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hung", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--give-up", type=float, default=3.0)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    fake_port = free_port()
    upstream = f"http://127.0.0.1:{fake_port}"
    fake = Fake(upstream)
    with (
        tempfile.TemporaryDirectory() as tmp,
        process(fake_upstream(fake_port), f"{upstream}/fake/stats"),
    ):
        db = f"{tmp}/bench.db"
        port = free_port()
        serve = synopsis_serve(
            port, "--db", db, "--upstream", f"{upstream}/v1",
            "--upstream-concurrency", str(args.concurrency),
        )  # fmt: skip
        key_a, key_b = key_for(db, "tenant-a"), key_for(db, "tenant-b")
        url = f"http://127.0.0.1:{port}"
        with process(serve, f"{url}/healthz"):
            found = asyncio.run(scenario(url, key_a, key_b, fake, args))
    during, after = sorted(found.pop("during")), sorted(found.pop("after"))  # type: ignore[arg-type]
    print(f"| hung calls of tenant A | {args.hung} (clients give up after {args.give_up} s) |")
    print(f"| --upstream-concurrency | {args.concurrency} |")
    for name, value in found.items():
        print(f"| {name.replace('_', ' ')} | {value} |")
    for name, values in (
        ("B while A's calls hang (after the burst)", during),
        ("B after A gave up", after),
    ):
        print(
            f"| {name}: p50 / max | {values[len(values) // 2] * 1000:.1f} ms / "
            f"{values[-1] * 1000:.1f} ms (goal: every one < 1000 ms) |"
        )


if __name__ == "__main__":
    main()
