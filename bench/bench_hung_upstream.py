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


async def measure_b(url: str, key: str, count: int) -> list[float]:
    latencies = []
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as client:
        for _ in range(count):
            started = time.perf_counter()
            response = await client.post("/v1/chat/completions", json=HI)
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise SystemExit(f"tenant B got {response.status_code}: {response.text[:200]}")
    return latencies


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
        plateau = min(args.hung, args.concurrency)
        while fake.hanging < plateau and time.perf_counter() - started < args.give_up / 2:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        reached = fake.hanging
        settled = time.perf_counter() - started
        burst = await measure_b(url, key_b, 1)  # the refusals may still be on their way
        refused = args.hung - plateau
        stop = started + args.give_up / 2
        while sum(c.done() for c in calls) < refused and time.perf_counter() < stop:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        answered = time.perf_counter() - started
        during = await measure_b(url, key_b, args.samples)
        outcomes = await asyncio.gather(*calls)
    for _ in range(100):  # up to 10 s for the upstream to see the calls closed
        if fake.hanging == 0:
            break
        await asyncio.sleep(0.1)
    after = await measure_b(url, key_b, args.samples)
    return {
        "refused_429": outcomes.count("429"),
        "gave_up": outcomes.count("gave up"),
        "reached_upstream": reached,
        "seconds_to_reach_it": round(settled, 2),
        "seconds_until_the_rest_got_429": round(answered, 2),
        "B during the burst (ms)": round(burst[0] * 1000, 1),
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
