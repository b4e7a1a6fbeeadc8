"""The shipped static embedder (a model2vec model distilled from all-MiniLM-L6-v2)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from synopsis.embeddings import STATIC_MODEL_DIR, E5Embedder, StaticEmbedder, load_embedder
from synopsis.errors import ConfigError, InvalidInput
from synopsis.memory.sqlite import SQLiteStore

DOCS = {
    "dog": "I adopted a puppy from the shelter last week",
    "tax": "The quarterly tax filing is due on Friday",
    "bike": "She rides her bicycle to the office when it is sunny",
    "cello": "My sister plays the cello in an orchestra",
    "trip": "We booked flights to Lisbon for the summer holiday",
}


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder()


def test_vectors_are_normalized_and_deterministic(embedder: StaticEmbedder) -> None:
    first = embedder(["hello world", "a second, longer sentence about coffee"])
    assert embedder.dimensions == 384
    assert [len(v) for v in first] == [384, 384]
    assert all(math.isclose(math.hypot(*v), 1.0, abs_tol=1e-3) for v in first)
    assert embedder(["hello world", "a second, longer sentence about coffee"]) == first
    assert embedder([]) == []


def test_non_strings_are_rejected(embedder: StaticEmbedder) -> None:
    with pytest.raises(InvalidInput, match="strings"):
        embedder(["fine", 3])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What pet does the user have?", "dog"),
        ("Which musical instrument?", "cello"),
        ("cycling to work", "bike"),
    ],
)
def test_vector_search_finds_paraphrases_keywords_miss(
    embedder: StaticEmbedder, query: str, expected: str
) -> None:
    store = SQLiteStore(":memory:", embedder=embedder)
    for key, text in DOCS.items():
        store.put("t", ("user", "u1"), key, text)
    keyword = [h.item.key for h in store.search("t", query=query)]
    assert keyword[:1] != [expected]
    assert store.search("t", query=query, mode="vector")[0].item.key == expected


def test_any_model2vec_folder_loads_and_a_missing_one_is_a_config_error(tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(STATIC_MODEL_DIR, copy)
    assert StaticEmbedder(copy)(["hello"]) == StaticEmbedder()(["hello"])
    with pytest.raises(ConfigError, match=r"model\.safetensors"):
        StaticEmbedder(tmp_path / "nothing-here")


def test_load_embedder_knows_every_configured_name() -> None:
    assert load_embedder("none") is None
    assert isinstance(load_embedder("static"), StaticEmbedder)
    assert isinstance(load_embedder("e5"), E5Embedder)
    with pytest.raises(ConfigError, match="unknown embedder 'bert'"):
        load_embedder("bert")
