"""One exception tree: the service's errors live in ``synopsis.errors``; the server maps them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import synopsis
import synopsis.errors
import synopsis.server
from synopsis.errors import (
    ConfigError,
    InvalidInput,
    NotFound,
    SessionConflict,
    SynopsisError,
    Unauthorized,
    UpstreamNotConfigured,
)
from synopsis.server.errors import status_of

SERVICE_ERRORS = (Unauthorized, UpstreamNotConfigured, SessionConflict)


def test_the_server_defines_no_exception_of_its_own() -> None:
    """Every exception class found in ``synopsis.server.*`` is one of ``synopsis.errors``."""
    own = []
    for info in pkgutil.iter_modules(synopsis.server.__path__, "synopsis.server."):
        module = importlib.import_module(info.name)
        own += [
            f"{info.name}.{name}"
            for name, value in vars(module).items()
            if inspect.isclass(value)
            and issubclass(value, BaseException)
            and value.__module__.startswith("synopsis.server")
        ]
    assert own == []


@pytest.mark.parametrize("error", SERVICE_ERRORS, ids=lambda e: e.__name__)
def test_the_service_errors_are_in_the_tree(error: type[SynopsisError]) -> None:
    """Defined in synopsis.errors, drawn in its docstring, exported from (and shown as)
    ``synopsis``."""
    assert vars(synopsis.errors)[error.__name__] is error and error.__module__ == "synopsis"
    assert f"── {error.__name__} " in (synopsis.errors.__doc__ or "")
    assert error.__name__ in synopsis.errors.__all__
    assert getattr(synopsis, error.__name__) is error


def test_every_error_of_the_tree_is_exported_from_synopsis() -> None:
    """``synopsis.errors.__all__`` (but its helper function) is part of ``synopsis.__all__``."""
    assert set(synopsis.errors.__all__) - set(synopsis.__all__) == set()


@pytest.mark.parametrize(
    ("error", "parent", "status"),
    [
        (Unauthorized("no key"), SynopsisError, 401),
        (UpstreamNotConfigured("no upstream"), ConfigError, 503),
        (SessionConflict("taken"), InvalidInput, 409),
        (NotFound("gone"), NotFound, 404),
        (ConfigError("bad option"), ConfigError, 422),
    ],
)
def test_the_http_status_follows_the_class(
    error: SynopsisError, parent: type[SynopsisError], status: int
) -> None:
    """The mapping is unchanged by the move: 401, 503, 409 and the tree's own statuses."""
    assert isinstance(error, parent)
    assert status_of(error) == status
    assert error.to_dict()["type"] == type(error).__name__
