"""Checks of a put_many batch: namespaces shared by many items are checked once, exactly."""

from __future__ import annotations

import pytest

from synopsis.errors import InvalidInput, InvalidNamespace
from synopsis.memory import NewMemory
from synopsis.memory._checks import prepare_put_many


def test_items_sharing_a_namespace_get_the_same_normalized_tuple() -> None:
    """A tuple, a str path and a list all normalize to the same tuple of labels."""
    shared = ("user", "u1")
    requests = prepare_put_many(
        "t",
        [
            NewMemory(shared, "a", "x"),
            NewMemory("user/u1", "b", "x"),
            NewMemory(["user", "u1"], "c", "x"),
            NewMemory(shared, "d", "x"),
        ],
    )
    assert [r.namespace for r in requests] == [("user", "u1")] * 4


def test_a_bad_namespace_repeated_in_a_batch_names_the_first_item_using_it() -> None:
    """Remembering good namespaces never lets a bad one through, and the index is exact."""
    bad = ("user", "a\x01b")
    batch = [NewMemory(("user", "u1"), "a", "x"), NewMemory(bad, "b", "x")]
    batch.append(NewMemory(bad, "c", "x"))
    with pytest.raises(InvalidNamespace, match=r"^item 1: ") as raised:
        prepare_put_many("t", batch)
    assert raised.value.index == 1


def test_a_namespace_holding_something_unhashable_is_refused_as_a_namespace() -> None:
    """A tuple with a list inside is an invalid namespace (not a TypeError from a cache)."""
    batch = [NewMemory(("user", "u1"), "a", "x"), NewMemory(("user", ["u1"]), "b", "x")]  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespace, match=r"^item 1: namespace label 1"):
        prepare_put_many("t", batch)


def test_text_checks_stay_exact_for_ascii_and_other_text() -> None:
    """NUL is refused in ASCII text, a lone surrogate in other text; plain Unicode passes."""
    with pytest.raises(InvalidInput, match="NUL"):
        prepare_put_many("t", [NewMemory(("n",), "k", "ascii\x00text")])
    with pytest.raises(InvalidInput, match="lone surrogates"):
        prepare_put_many("t", [NewMemory(("n",), "k", "caf\u00e9 \ud800")])
    (request,) = prepare_put_many("t", [NewMemory(("n",), "k", "café 咖啡", context="ok")])
    assert request.text == "café 咖啡"
