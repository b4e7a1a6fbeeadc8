"""Which model made a vector: how an embedder's identity is found, and the bundled models' ids."""

from __future__ import annotations

import functools
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from synopsis.embeddings import STATIC_MODEL_DIR, E5Embedder, StaticEmbedder, model_digest
from synopsis.errors import ConfigError
from synopsis.memory import open_store
from synopsis.memory._identity import embedder_identity
from synopsis.memory.inmemory import InMemoryStore
from synopsis.testing import BigramEmbedder


def plain_function(texts: Sequence[str]) -> list[list[float]]:
    return [[float(len(text)), 1.0] for text in texts]


class Named:
    embedder_id = "acme-encoder@2024-06"

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return plain_function(texts)


def test_a_store_keyword_wins_over_the_embedders_own_id() -> None:
    assert embedder_identity(Named(), "pinned@1") == "pinned@1"
    assert InMemoryStore(embedder=Named(), embedder_id="pinned@1").embedder_id == "pinned@1"


def test_an_embedder_names_itself_with_an_embedder_id_attribute() -> None:
    assert embedder_identity(Named()) == "acme-encoder@2024-06"


def test_an_anonymous_callable_is_named_by_its_module_and_qualified_name() -> None:
    """Documented default: tells two functions or classes apart, not two versions of one."""
    assert embedder_identity(plain_function) == f"callable:{__name__}.plain_function"
    assert embedder_identity(BigramEmbedder()) == "callable:synopsis.testing.BigramEmbedder"
    anonymous = embedder_identity(lambda texts: [])
    assert anonymous is not None and anonymous.startswith(f"callable:{__name__}.test_an_")
    assert anonymous.endswith(".<locals>.<lambda>")
    partial = functools.partial(plain_function)
    assert embedder_identity(partial) == "callable:functools.partial"


def test_no_embedder_has_no_identity_and_refuses_one() -> None:
    assert embedder_identity(None) is None
    assert InMemoryStore().embedder_id is None
    with pytest.raises(ConfigError, match="pass an embedder"):
        embedder_identity(None, "orphan")


@pytest.mark.parametrize("bad", ["", " ", "tab\there", "x" * 201, 42])
def test_an_unusable_identity_is_a_config_error_naming_where_it_came_from(bad: object) -> None:
    with pytest.raises(ConfigError, match="embedder_id"):
        embedder_identity(plain_function, bad)  # type: ignore[arg-type]

    class Odd(Named):
        embedder_id = bad  # type: ignore[assignment]

    with pytest.raises(ConfigError, match=r"Odd\.embedder_id"):
        embedder_identity(Odd())


def test_open_store_passes_the_identity_on(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "m.db"), embedder=plain_function, embedder_id="p@1") as store:
        assert store.embedder_id == "p@1"


def test_the_static_model_is_named_by_its_folder_and_a_hash_of_its_files(tmp_path: Path) -> None:
    shipped = StaticEmbedder().embedder_id
    assert re.fullmatch(r"static:minilm_static@[0-9a-f]{12}", shipped)
    assert StaticEmbedder().embedder_id == shipped
    copy = tmp_path / "minilm_static"
    shutil.copytree(STATIC_MODEL_DIR, copy)
    assert StaticEmbedder(copy).embedder_id == shipped  # same files, same identity
    with (copy / "config.json").open("a", encoding="utf-8") as config:
        config.write("\n")  # a new version of the model
    assert StaticEmbedder(copy).embedder_id != shipped


def test_a_digest_follows_the_bytes_of_the_files(tmp_path: Path) -> None:
    one, two = tmp_path / "a.bin", tmp_path / "b.bin"
    one.write_bytes(b"weights v1")
    two.write_bytes(b"tokenizer")
    first = model_digest(one, two)
    assert re.fullmatch(r"[0-9a-f]{12}", first)
    assert model_digest(two, one) != first
    one.write_bytes(b"weights v2")
    assert model_digest(one, two) != first


def test_e5_is_named_by_a_hash_of_its_model_file() -> None:
    assert re.fullmatch(r"e5:multilingual-e5-small-q4@[0-9a-f]{12}", E5Embedder().embedder_id)
