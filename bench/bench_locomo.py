"""Benchmark (a): recall quality on LoCoMo, ours against the usual keyword baselines.

For each LoCoMo conversation, every turn is indexed as a memory of kind ``turn`` and each
session's summary as a memory of kind ``summary``, all under the namespace
``("user", sample_id, "session", N)``. Every question with evidence is then asked as a search:

- *turn recall@k*: the share of the question's evidence turns among the top k turns
  (searching kind ``turn``);
- *session recall@k*: the share of its evidence sessions that own at least one of the top k
  hits, turns and summaries alike.

Every method sees the same documents and the question text as its query. Our stores are
also given each turn's ``context``: the two turns before and after it in its session
(``ranking.neighbour_contexts``), as a user storing chat turns would put them; the row
"no context" leaves it out. Run ``python bench/bench_locomo.py`` (``--postgres-url`` adds
our PostgreSQL backend, ``--no-embeddings`` skips the vector and hybrid rows, ``--embedders``
picks them, see ``bench_locomo_vectors.py``; ``--no-ablation`` skips the ablation table of
the keyword ranking, see ``_locomo_ablation.py``). The data is read from
``../shared/data/locomo`` (CC BY-NC); nothing from it is copied into the repository.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from synopsis.memory.ranking import neighbour_contexts

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev6.json"
TENANT = "locomo"
KS = (5, 10)
TURN, SUMMARY = "turn", "summary"
LIKE_RANKED = "LIKE '%kw%', most keywords first"
# Our own short list for the LIKE baseline, which has no ranking to push common words down.
STOPWORDS = frozenset(
    """
    a an and are as at be been but by did do does for from had has have he her his how i
    if in into is it its me my of on or our she so than that the their them then there
    they this to was we were what when where which who whom why will with would you your
    """.split()  # noqa: SIM905 - a word list reads better as text
)


# --- data --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Doc:
    ident: str  # the dia_id of a turn ("D3:7") or "S3" for the summary of session 3
    session: int
    kind: str
    text: str
    context: str = ""  # for a turn: the turns around it in its session


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    turns: frozenset[str]
    sessions: frozenset[int]
    category: int


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    docs: tuple[Doc, ...]
    questions: tuple[Question, ...]
    dropped_evidence: int
    dates: dict[int, str]  # session -> its date and time, as the data gives it


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo of {turn['blip_caption']}]"
    return text


def evidence_ids(raw: Iterable[str]) -> list[str]:
    """Evidence as dia_ids; a few entries hold two ids ("D8:6; D9:17") or a stray colon."""
    ids = []
    for entry in raw:
        for part in re.split(r"[;,\s]+", entry):
            match = re.fullmatch(r"D:?(\d+):(\d+)", part.strip())
            if match:
                ids.append(f"D{match[1]}:{match[2]}")
    return ids


def load(path: Path) -> list[Conversation]:
    import json

    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        talk, summaries = sample["conversation"], sample.get("session_summary", {})
        docs: list[Doc] = []
        for name, turns in talk.items():
            match = re.fullmatch(r"session_(\d+)", name)
            if not match or not isinstance(turns, list):
                continue
            session = int(match[1])
            texts = [turn_text(t) for t in turns]
            contexts = neighbour_contexts(texts)
            docs += [
                Doc(t["dia_id"], session, TURN, text, context)
                for t, text, context in zip(turns, texts, contexts, strict=True)
            ]
            if summary := summaries.get(f"{name}_summary"):
                docs.append(Doc(f"S{session}", session, SUMMARY, summary))
        known = {d.ident: d.session for d in docs if d.kind == TURN}
        questions, dropped = [], 0
        for qa in sample["qa"]:
            ids = evidence_ids(qa.get("evidence", []))
            found = [i for i in ids if i in known]
            dropped += len(ids) - len(found)
            if found:
                questions.append(
                    Question(
                        text=qa["question"],
                        turns=frozenset(found),
                        sessions=frozenset(known[i] for i in found),
                        category=int(qa["category"]),
                    )
                )
        dates = {
            int(m[1]): str(value)
            for name, value in talk.items()
            if (m := re.fullmatch(r"session_(\d+)_date_time", name))
        }
        conversations.append(
            Conversation(sample["sample_id"], tuple(docs), tuple(questions), dropped, dates)
        )
    return conversations


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


# --- retrievers --------------------------------------------------------------------------------


class Retriever(Protocol):
    name: str

    def index(self, conversation: Conversation) -> None: ...

    def search(self, query: str, k: int, kind: str | None) -> list[Doc]: ...

    def close(self) -> None: ...


class LikeRetriever:
    """The original design's recall: ``text LIKE '%keyword%'`` for each keyword of the query.

    ``ranked`` orders by the number of keywords matched, then newest; otherwise newest first,
    as a plain LIKE query returns them.
    """

    def __init__(self, *, ranked: bool) -> None:
        self.name = LIKE_RANKED if ranked else "LIKE '%kw%', newest first"
        self.ranked = ranked
        self.db = sqlite3.connect(":memory:")
        self.db.execute("create table docs (pos integer primary key, kind text, body text)")
        self.docs: list[Doc] = []

    def index(self, conversation: Conversation) -> None:
        self.docs = list(conversation.docs)
        self.db.execute("delete from docs")
        self.db.executemany(
            "insert into docs values (?, ?, ?)",
            [(pos, d.kind, d.text) for pos, d in enumerate(self.docs)],
        )

    def search(self, query: str, k: int, kind: str | None) -> list[Doc]:
        keywords = sorted({w for w in words(query) if w not in STOPWORDS and len(w) > 2})
        if not keywords:
            return []
        likes = ["(body like ? escape '\\')" for _ in keywords]
        patterns = ["%" + re.sub(r"([%_\\])", r"\\\1", w) + "%" for w in keywords]
        matched = " + ".join(f"({like})" for like in likes)
        order = f"{matched} desc, pos desc" if self.ranked else "pos desc"
        sql = f"select pos from docs where ({' or '.join(likes)})"
        params: list[object] = [*patterns]
        if kind:
            sql += " and kind = ?"
            params.append(kind)
        sql += f" order by {order} limit ?"
        params = [*params, *(patterns if self.ranked else []), k]
        return [self.docs[pos] for (pos,) in self.db.execute(sql, params)]

    def close(self) -> None:
        self.db.close()


class Fts5Retriever:
    """SQLite FTS5 with its default tokenizer (unicode61), the query's words OR-ed, bm25 order."""

    name = "SQLite FTS5, default tokenizer"

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("create virtual table docs using fts5(body, kind unindexed)")
        self.docs: list[Doc] = []

    def index(self, conversation: Conversation) -> None:
        self.docs = list(conversation.docs)
        self.db.execute("delete from docs")
        self.db.executemany(
            "insert into docs(rowid, body, kind) values (?, ?, ?)",
            [(pos, d.text, d.kind) for pos, d in enumerate(self.docs)],
        )

    def search(self, query: str, k: int, kind: str | None) -> list[Doc]:
        terms = sorted(set(words(query)))
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        sql = "select rowid from docs where docs match ?"
        params: list[object] = [match]
        if kind:
            sql += " and kind = ?"
            params.append(kind)
        sql += " order by bm25(docs) limit ?"
        return [self.docs[pos] for (pos,) in self.db.execute(sql, [*params, k])]

    def close(self) -> None:
        self.db.close()


class RankBM25Retriever:
    """``rank_bm25.BM25Okapi`` over lower-cased word tokens."""

    name = "rank_bm25 (BM25Okapi)"

    def index(self, conversation: Conversation) -> None:
        from rank_bm25 import BM25Okapi

        self.docs = list(conversation.docs)
        self.bm25 = BM25Okapi([words(d.text) for d in self.docs])

    def search(self, query: str, k: int, kind: str | None) -> list[Doc]:
        scores = self.bm25.get_scores(words(query))
        order = sorted(range(len(self.docs)), key=lambda i: -scores[i])
        hits = [self.docs[i] for i in order if scores[i] > 0 and kind in (None, self.docs[i].kind)]
        return hits[:k]

    def close(self) -> None:
        pass


class BM25sRetriever:
    """``bm25s`` with its own tokenizer and English stopwords, one index per kind filter."""

    name = "bm25s (English stopwords)"

    def index(self, conversation: Conversation) -> None:
        self.indexes = {kind: self._build(conversation.docs, kind) for kind in (None, TURN)}

    @staticmethod
    def _build(docs: Sequence[Doc], kind: str | None) -> tuple[Any, list[Doc]]:
        import bm25s

        chosen = [d for d in docs if kind in (None, d.kind)]
        retriever = bm25s.BM25()
        retriever.index(
            bm25s.tokenize([d.text for d in chosen], stopwords="en", show_progress=False),
            show_progress=False,
        )
        return retriever, chosen

    def search(self, query: str, k: int, kind: str | None) -> list[Doc]:
        import bm25s

        retriever, chosen = self.indexes[kind]
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        results, scores = retriever.retrieve(tokens, k=min(k, len(chosen)), show_progress=False)
        return [chosen[i] for i, s in zip(results[0], scores[0], strict=True) if s > 0]

    def close(self) -> None:
        pass


class SynopsisRetriever:
    """A synopsis store: every document a memory, searched under the conversation's user."""

    def __init__(
        self, name: str, store: Any, mode: str, cleanup: Callable[[], None], *,
        reuse: bool = False, context: bool = True,
    ) -> None:  # fmt: skip
        self.name, self.store, self.mode, self.cleanup = name, store, mode, cleanup
        self.reuse = reuse  # the store already holds the documents (indexed by another row)
        self.context = context  # put each turn with the turns around it as its context
        self.sample_id = ""
        self.by_key: dict[str, Doc] = {}

    def index(self, conversation: Conversation) -> None:
        from synopsis.memory import NewMemory

        self.sample_id = conversation.sample_id
        self.by_key = {d.ident: d for d in conversation.docs}
        if self.reuse:
            return
        self.store.put_many(
            TENANT,
            [
                NewMemory(
                    namespace=("user", self.sample_id, "session", str(d.session)),
                    key=d.ident,
                    text=d.text,
                    kind=d.kind,
                    context=d.context if self.context else "",
                )
                for d in conversation.docs
            ],
        )

    def search(self, query: str, k: int, kind: str | None) -> list[Doc]:
        hits = self.store.search(
            TENANT, ("user", self.sample_id), query=query, kind=kind, limit=k, mode=self.mode
        )
        return [self.by_key[h.item.key] for h in hits]

    def close(self) -> None:
        self.cleanup()


def synopsis_retrievers(args: argparse.Namespace, workdir: Path) -> Iterator[Retriever]:
    from synopsis.memory.inmemory import InMemoryStore
    from synopsis.memory.sqlite import SQLiteStore

    bare = SQLiteStore(str(workdir / "bare.db"))
    yield SynopsisRetriever(
        "synopsis keyword, no context (SQLite)", bare, "keyword", bare.close, context=False
    )
    plain = SQLiteStore(str(workdir / "keyword.db"))
    yield SynopsisRetriever("synopsis keyword (SQLite)", plain, "keyword", plain.close)
    memory = InMemoryStore()
    yield SynopsisRetriever("synopsis keyword (in-memory)", memory, "keyword", memory.close)
    if args.postgres_url:
        yield postgres_retriever(args.postgres_url)
    if args.embeddings:  # the vector and hybrid rows: bench_locomo_vectors.py
        from bench_locomo_vectors import loaded, vector_retrievers

        yield from vector_retrievers(list(loaded(args.embedders.split(","))), workdir)


def postgres_retriever(url: str) -> Retriever:
    import psycopg

    from synopsis.memory.postgres import PostgresStore

    schema = "bench_locomo"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"drop schema if exists {schema} cascade")

    def drop() -> None:
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"drop schema if exists {schema} cascade")

    store = PostgresStore(url, schema=schema)
    return SynopsisRetriever("synopsis keyword (PostgreSQL)", store, "keyword", drop)


# --- scoring -----------------------------------------------------------------------------------


@dataclass
class Score:
    turn: dict[int, list[float]]
    session: dict[int, list[float]]
    index_seconds: float = 0.0
    query_seconds: list[float] | None = None

    def row(self) -> list[float]:
        return [statistics.fmean(self.turn[k]) for k in KS] + [
            statistics.fmean(self.session[k]) for k in KS
        ]


def evaluate(retriever: Retriever, conversations: Sequence[Conversation]) -> Score:
    score = Score(turn={k: [] for k in KS}, session={k: [] for k in KS}, query_seconds=[])
    assert score.query_seconds is not None
    for conversation in conversations:
        start = time.perf_counter()
        retriever.index(conversation)
        score.index_seconds += time.perf_counter() - start
        for question in conversation.questions:
            start = time.perf_counter()
            turns = retriever.search(question.text, max(KS), TURN)
            anything = retriever.search(question.text, max(KS), None)
            score.query_seconds.append((time.perf_counter() - start) / 2)
            for k in KS:
                found = {d.ident for d in turns[:k]} & question.turns
                score.turn[k].append(len(found) / len(question.turns))
                owned = {d.session for d in anything[:k]} & question.sessions
                score.session[k].append(len(owned) / len(question.sessions))
    return score


def report(results: list[tuple[str, Score]], conversations: Sequence[Conversation]) -> None:
    questions = sum(len(c.questions) for c in conversations)
    docs = sum(len(c.docs) for c in conversations)
    summaries = sum(d.kind == SUMMARY for c in conversations for d in c.docs)
    dropped = sum(c.dropped_evidence for c in conversations)
    print(
        f"# LoCoMo recall, {time.strftime('%Y-%m-%d')} on {platform.machine()}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    )
    print(
        f"{len(conversations)} conversations, {docs - summaries} turns + {summaries} session "
        f"summaries indexed, {questions} questions with evidence "
        f"({dropped} evidence ids that name no turn were ignored)\n"
    )
    recall_table(results, LIKE_RANKED, "ranked LIKE")


def recall_table(results: Sequence[tuple[str, Score]], base_name: str, base_label: str) -> None:
    """Recall, time to index and query time, also as a ratio to ``base_name``'s (same run)."""
    base = statistics.median(dict(results)[base_name].query_seconds or [0.0])
    print(
        "| method | turn R@5 | turn R@10 | session R@5 | session R@10 "
        f"| index s | median query ms | query / {base_label} |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, score in results:
        cells = " | ".join(f"{v:.3f}" for v in score.row())
        median = statistics.median(score.query_seconds or [0.0])
        ratio = median / base if base else float("nan")
        print(
            f"| {name} | {cells} | {score.index_seconds:.2f} | {median * 1000:.2f} | {ratio:.2f} |"
        )


def per_category(results: list[tuple[str, Score]], conversations: Sequence[Conversation]) -> None:
    categories = [q.category for c in conversations for q in c.questions]
    print(
        "\n| method | " + " | ".join(f"cat {c} turn R@10" for c in sorted(set(categories))) + " |"
    )
    print("|---|" + "---:|" * len(set(categories)))
    for name, score in results:
        cells = []
        for category in sorted(set(categories)):
            chosen = [v for v, c in zip(score.turn[10], categories, strict=True) if c == category]
            cells.append(f"{statistics.fmean(chosen):.3f} (n={len(chosen)})")
        print(f"| {name} | " + " | ".join(cells) + " |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--no-embeddings", dest="embeddings", action="store_false")
    parser.add_argument("--no-ablation", dest="ablation", action="store_false")
    parser.add_argument("--embedders", default="static,e5", help="see bench_locomo_vectors.py")
    args = parser.parse_args(argv)
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data} (use --data)")
    conversations = load(args.data)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        retrievers: list[Retriever] = [
            LikeRetriever(ranked=False),
            LikeRetriever(ranked=True),
            Fts5Retriever(),
            RankBM25Retriever(),
            BM25sRetriever(),
        ]
        results = []
        for retriever in [*retrievers, *synopsis_retrievers(args, Path(tmp))]:
            print(f"running {retriever.name}", file=sys.stderr)
            with contextlib.closing(retriever):
                results.append((retriever.name, evaluate(retriever, conversations)))
    report(results, conversations)
    per_category(results, conversations)
    if args.ablation:
        from _locomo_ablation import ablation

        ablation(conversations)


if __name__ == "__main__":
    main()
