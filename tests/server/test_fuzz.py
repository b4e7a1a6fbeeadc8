"""Schema-driven fuzzing of every endpoint (schemathesis): no 5xx, every answer as documented.

The server runs for real with a fake upstream behind the proxy; schemathesis reads
``/openapi.json`` and sends valid and invalid requests to every operation, with a valid key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from synopsis.server import ServerOptions, create_app
from synopsis.server.db import Database
from synopsis.server.keys import KeyRing
from synopsis.server.testing import FakeUpstream, running

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@dataclass
class Target:
    url: str
    key: str


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    db = str(tmp_path_factory.mktemp("fuzz") / "fuzz.db")
    with Database(db) as database:
        key = KeyRing(database).create("fuzz").secret
    fake = FakeUpstream()
    with running(fake.app) as upstream:
        options = ServerOptions(db=db, upstream=f"{upstream}/v1", summarize_every=3)
        with running(create_app(options), lifespan="on") as url:
            yield Target(url=url, key=key)


def _schema() -> schemathesis.BaseSchema:
    """The app's OpenAPI document (built without starting the app)."""
    loaded = schemathesis.openapi.from_dict(create_app(ServerOptions()).openapi())
    loaded.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
    return loaded


schema = _schema()


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_answers_match_the_schema(
    case: schemathesis.Case, target: Target
) -> None:
    case.call_and_validate(
        base_url=target.url, headers={"Authorization": f"Bearer {target.key}"}, checks=CHECKS
    )
