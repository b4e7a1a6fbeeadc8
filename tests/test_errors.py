"""The exception tree: every error survives pickling with its message and its attributes."""

from __future__ import annotations

import inspect
import pickle

import pytest

import synopsis.errors
from synopsis.errors import (
    AllModelsFailed,
    CoolingDown,
    DatabaseError,
    InvalidMessage,
    ProviderUnavailable,
    RateLimited,
    RetryExhausted,
    SynopsisError,
    UserDeleted,
)

#: One of each error whose constructor takes more than a message.
BUILT = [
    InvalidMessage("must be a string", index=3, field="role"),
    RateLimited("slow down", model="m", retry_after=2.5),
    ProviderUnavailable("down", model="m", status_code=503),
    RetryExhausted(model="m", attempts=3, last_error=ConnectionError("reset")),
    AllModelsFailed("every model failed", [RateLimited("a", model="m1"), ValueError("b")]),
    UserDeleted("acme", "u1", expected=1, current=2),
    CoolingDown("cooling down", retry_in=4.0),
    DatabaseError("put failed on db.example", operation="put", sqlstate="40P01"),
]
TREE = [
    value
    for value in vars(synopsis.errors).values()
    if inspect.isclass(value) and issubclass(value, SynopsisError)
]


def _sample(error_type: type[SynopsisError]) -> SynopsisError:
    for built in BUILT:
        if type(built) is error_type:
            return built
    return error_type("something went wrong")


@pytest.mark.parametrize("error_type", TREE, ids=lambda t: t.__name__)
def test_every_error_survives_pickling(error_type: type[SynopsisError]) -> None:
    """Loaded back (another process, a job queue), it is the same type with the same message
    and ``to_dict()``: keyword-only attributes and built messages included."""
    error = _sample(error_type)
    loaded = pickle.loads(pickle.dumps(error))
    assert type(loaded) is error_type
    assert str(loaded) == str(error) and repr(loaded.args) == repr(error.args)
    assert loaded.to_dict() == error.to_dict()


def test_an_exception_group_keeps_its_members() -> None:
    group = pickle.loads(pickle.dumps(BUILT[4]))
    assert isinstance(group, AllModelsFailed) and group.models == ("m1", "?")
    assert [type(e) for e in group.exceptions] == [RateLimited, ValueError]
