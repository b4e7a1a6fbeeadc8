"""kill -9 during appends and summary jobs: nothing lost, nothing doubled, every session summarized.

Issue 19's goal: kill -9 at random points of append + job over 30 sessions, and every session
ends summarized up to its last ``summarize_every`` boundary within one sweep interval. The
server's rule is read as that boundary: a session is due once ``summarize_every`` messages
follow what its latest summary covers, so "summarized" means fewer than that remain.

``synopsis serve`` runs in its own process (SQLite by default, or ``--db postgresql://…``) and
summarizes every ``--every`` messages. Writers append turns with unique contents to random
sessions while the server is killed with SIGKILL ``--kills`` times at random moments (appends
and the background jobs they queue are then in flight), and restarted after each kill. Then the
server is started once more and the writers stop. Checked, from the database itself:

- every append the server acknowledged is stored exactly once; an append cut off by the kill
  is stored whole or not at all; nothing is stored twice; positions run 0..n-1 with no gap,
  and the session's message count agrees;
- every session ends with fewer than ``--every`` messages past its summary, and the time
  that took after the last restart is reported next to ``--sweep`` (the goal: one interval,
  plus a killed job's lease).

Usage: ``bench_kill9.py [--sessions 30] [--kills 30] [--every 4] [--sweep 2] [--db URL]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_server import ENV, create_key, free_port, synopsis_serve, wait_healthy

USER = "u1"


@dataclass
class Ledger:
    """What the writers sent, and what the server said of each append."""

    acknowledged: dict[str, list[str]] = field(default_factory=dict)  # session -> contents
    uncertain: dict[str, list[list[str]]] = field(default_factory=dict)  # cut off by a kill
    refused: Counter[int] = field(default_factory=Counter)  # HTTP status -> count
    appends: int = 0


def serve_command(port: int, db: str, args: argparse.Namespace) -> list[str]:
    return synopsis_serve(
        port, "--db", db, "--schema", args.schema, "--summarize-every", str(args.every),
        "--sweep-seconds", str(args.sweep), "--lease-seconds", str(args.lease),
        "--poll-seconds", "0.05", "--drain-seconds", "0",
    )  # fmt: skip


def start(command: list[str], url: str, log: Path) -> subprocess.Popen[bytes]:
    """The server, up; its stderr appended to ``log``, shown when it fails to come up."""
    with log.open("ab") as sink:
        child = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        wait_healthy(f"{url}/healthz", child)
    except SystemExit:
        sys.stderr.write(log.read_text(errors="replace")[-3000:])
        raise
    return child


async def writer(
    url: str, key: str, sessions: list[str], ledger: Ledger, stop: asyncio.Event, rng: random.Random
) -> None:
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=10
    ) as client:
        while not stop.is_set():
            session = rng.choice(sessions)
            ledger.appends += 1
            parts = range(rng.randint(1, 3))
            contents = [f"{session} append {ledger.appends} part {i}" for i in parts]
            messages = [
                {"role": ("user", "assistant")[i % 2], "content": text}
                for i, text in enumerate(contents)
            ]
            try:
                response = await client.post(
                    f"/v1/sessions/{USER}/{session}/messages", json={"messages": messages}
                )
            except httpx.HTTPError:  # the kill cut it off: stored whole or not at all
                ledger.uncertain.setdefault(session, []).append(contents)
                await asyncio.sleep(0.05)
                continue
            if response.is_success:
                ledger.acknowledged.setdefault(session, []).extend(contents)
            else:
                ledger.refused[response.status_code] += 1


def stored(db: str, schema: str, session: str) -> tuple[list[tuple[int, str]], int | None]:
    """The session's (position, content) rows and its recorded message count."""
    if db.startswith("postgresql"):
        import psycopg

        prefix = f'"{schema}".server_'
        with psycopg.connect(db) as conn:
            rows = conn.execute(
                f"SELECT position, body FROM {prefix}messages WHERE tenant = %s"
                " AND session_id = %s ORDER BY position",
                ("bench", session),
            ).fetchall()
            count = conn.execute(
                f"SELECT message_count FROM {prefix}sessions WHERE tenant = %s AND session_id = %s",
                ("bench", session),
            ).fetchone()
    else:
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT position, body FROM server_messages WHERE tenant = ? AND session_id = ?"
                " ORDER BY position",
                ("bench", session),
            ).fetchall()
            count = conn.execute(
                "SELECT message_count FROM server_sessions WHERE tenant = ? AND session_id = ?",
                ("bench", session),
            ).fetchone()
    return [(p, json.loads(b)["content"]) for p, b in rows], (count[0] if count else None)


def integrity(db: str, schema: str, sessions: list[str], ledger: Ledger) -> dict[str, int]:
    """Counts of every way the stored histories could disagree with the ledger (all 0 = good)."""
    found: Counter[str] = Counter()
    for session in sessions:
        rows, count = stored(db, schema, session)
        contents = [c for _, c in rows]
        found["position gaps"] += [p for p, _ in rows] != list(range(len(rows)))
        found["count mismatches"] += count is not None and count != len(rows)
        found["stored twice"] += sum(n - 1 for n in Counter(contents).values() if n > 1)
        present = set(contents)
        acked = ledger.acknowledged.get(session, [])
        found["acknowledged but lost"] += sum(c not in present for c in acked)
        for append in ledger.uncertain.get(session, []):
            kept = sum(c in present for c in append)
            found["appends stored in part"] += 0 < kept < len(append)
        sent = set(acked) | {c for a in ledger.uncertain.get(session, []) for c in a}
        found["stored but never sent"] += sum(c not in sent for c in present)
    return dict(found)


def summarized(
    client: httpx.Client, sessions: list[str], counts: dict[str, int], every: int
) -> int:
    """How many sessions have fewer than ``every`` messages past their summary (the server's
    rule: a session is due once ``every`` messages follow what its summary covers)."""
    done = 0
    for session in sessions:
        if counts[session] < every:
            done += 1
            continue
        response = client.get(f"/v1/sessions/{USER}/{session}/summary")
        if response.status_code == 200 and counts[session] - response.json()["covers_to"] < every:
            done += 1
    return done


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    sessions = [f"s{i:02d}" for i in range(args.sessions)]
    ledger = Ledger()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"{tmp}/bench.db"
        key = create_key(db, args.schema)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        command = serve_command(port, db, args)
        for _ in range(args.kills):
            child = start(command, url, Path(tmp) / "serve.log")
            asyncio.run(kill_while_writing(child, url, key, sessions, ledger, args, rng))
        child = start(command, url, Path(tmp) / "serve.log")
        restarted = time.monotonic()
        counts = {s: len(stored(db, args.schema, s)[0]) for s in sessions}
        deadline = restarted + args.wait
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as client:
            done = summarized(client, sessions, counts, args.every)
            while done < len(sessions) and time.monotonic() < deadline:
                time.sleep(0.1)
                done = summarized(client, sessions, counts, args.every)
        converged = time.monotonic() - restarted
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)
        checks = integrity(db, args.schema, sessions, ledger)
    return {
        "kills": args.kills,
        "sessions": args.sessions,
        "appends sent": ledger.appends,
        "appends cut off by a kill": sum(len(v) for v in ledger.uncertain.values()),
        "appends refused (status: count)": dict(ledger.refused),
        **checks,
        "sessions with < every messages past their summary": f"{done}/{len(sessions)}",
        "seconds after the last restart until they were": round(converged, 2),
        "sweep interval + lease (s)": args.sweep + args.lease,
    }


async def kill_while_writing(
    child: subprocess.Popen[bytes], url: str, key: str, sessions: list[str], ledger: Ledger,
    args: argparse.Namespace, rng: random.Random,
) -> None:  # fmt: skip
    """Writers append until a random moment, when the server gets SIGKILL mid-flight."""
    stop = asyncio.Event()
    tasks = [
        asyncio.ensure_future(writer(url, key, sessions, ledger, stop, random.Random(rng.random())))
        for _ in range(args.writers)
    ]
    await asyncio.sleep(rng.uniform(0.2, args.max_run))
    child.send_signal(signal.SIGKILL)
    child.wait()
    stop.set()
    await asyncio.gather(*tasks)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--every", type=int, default=4, help="summarize every N messages")
    parser.add_argument("--sweep", type=float, default=2.0, help="seconds between sweeps")
    parser.add_argument("--lease", type=float, default=2.0, help="a claimed job's lease (s)")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--max-run", type=float, default=2.0, help="longest run before a kill")
    parser.add_argument("--wait", type=float, default=60.0, help="longest wait for summaries")
    parser.add_argument("--db", default=None, help="SQLite file or postgresql:// URL")
    parser.add_argument("--schema", default="synopsis")
    parser.add_argument("--seed", type=int, default=19)
    return parser


def main() -> None:
    found = run(parser().parse_args())
    for name, value in found.items():
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
