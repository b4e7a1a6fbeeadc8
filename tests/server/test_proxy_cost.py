"""The proxy's hot path, guarded by operation counts (issue 21, item 6; no timings).

``POST /v1/chat/completions`` without a session, below the trigger: the lean route looks the
key up once per second at most (revocation holds within that second, by an injected clock),
does not run FastAPI's dependency (which would look the key up again, uncached) and counts no
token when the body's size alone keeps it below the trigger; that size bound is checked
against the real count on adversarial text.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from synopsis import AsyncCompactor, Trigger
from synopsis.server import ServerOptions, create_app, lean, limits
from synopsis.server import proxy as proxy_module
from synopsis.server.db import AsyncDatabase, Database
from synopsis.server.deps import Services
from synopsis.server.keys import AsyncKeyRing, KeyRing
from synopsis.server.proxy import surely_below
from synopsis.server.schemas import ChatCompletionRequest
from synopsis.server.testing import FakeUpstream
from synopsis.tokens import TokenCounter, default_estimate

HISTORY = [
    {"role": "system", "content": "You are a helpful travel planner."},
    *[
        {"role": ("user", "assistant")[i % 2], "content": f"Message {i}: plan day {i} by the lake."}
        for i in range(19)
    ],
]


TRIGGER = 10_000
#: The benchmark's request body: about 1 KB, so at most 4,000 tokens by the bound.
BODY = json.dumps({"model": "m", "messages": HISTORY}).encode()


class CountingDatabase:
    """The app's real database, counting the plans run on it (what the key ring needs)."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.db = db
        self.dialect = db.dialect
        self.clock = db.clock
        self.runs = 0

    async def run(self, plan: Any, **kw: Any) -> Any:
        self.runs += 1
        return await self.db.run(plan, **kw)


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Proxy:
    client: httpx.AsyncClient
    services: Services
    db_path: str
    key: str
    fake: FakeUpstream


@contextlib.asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[Proxy]:
    """The app in this task (a fixture's teardown would run in another task)."""
    db = str(tmp_path / "proxy.db")
    fake = FakeUpstream()
    options = ServerOptions(db=db, upstream="http://upstream/v1", trigger=Trigger(tokens=TRIGGER))
    app = create_app(options, upstream_transport=httpx.ASGITransport(app=fake.app))
    async with app.router.lifespan_context(app):
        with Database(db) as sync_db:
            key = KeyRing(sync_db).create("acme").secret
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://proxy/v1",
            headers={"Authorization": f"Bearer {key}"},
        )
        async with client:
            yield Proxy(client, app.state.services, db, key, fake)


def _counting_ring(services: Services, clock: Clock) -> CountingDatabase:
    counting = CountingDatabase(services.db)
    services.keys = AsyncKeyRing(counting, clock=clock)  # type: ignore[arg-type]
    return counting


async def _chat(client: httpx.AsyncClient, messages: list[dict[str, Any]] = HISTORY) -> int:
    body = json.dumps({"model": "m", "messages": messages}).encode()
    headers = {"content-type": "application/json"}
    answer = await client.post("/chat/completions", content=body, headers=headers)
    return answer.status_code


async def test_the_key_is_looked_up_once_a_second_and_a_revocation_holds_within_it(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as proxy:
        clock = Clock()
        counting = _counting_ring(proxy.services, clock)
        assert [await _chat(proxy.client) for _ in range(40)] == [200] * 40
        # One lookup for 40 requests: none per request, and FastAPI's dependency (an uncached
        # lookup of its own) never ran.
        assert counting.runs == 1
        clock.now = 1.0  # the remembered key is a second old: looked up again
        assert await _chat(proxy.client) == 200
        assert counting.runs == 2
        with Database(proxy.db_path) as sync_db:  # revoked elsewhere (the CLI, another replica)
            assert KeyRing(sync_db).revoke(proxy.key.split("_")[1]) is not None
        clock.now = 2.0
        refused = await proxy.client.post(
            "/chat/completions", json={"model": "m", "messages": HISTORY}
        )
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "Unauthorized"


async def test_a_revocation_through_the_ring_holds_at_once(tmp_path: Path) -> None:
    async with serving(tmp_path) as proxy:
        clock = Clock()
        _counting_ring(proxy.services, clock)
        assert await _chat(proxy.client) == 200
        assert await proxy.services.keys.revoke(proxy.key.split("_")[1]) is not None
        assert await _chat(proxy.client) == 401


async def test_no_token_is_counted_below_the_byte_bound(tmp_path: Path) -> None:
    async with serving(tmp_path) as proxy:
        calls = 0

        @functools.wraps(default_estimate)
        def counting_estimate(text: str) -> int:
            nonlocal calls
            calls += 1
            return default_estimate(text)

        proxy.services.compactor.counter = TokenCounter(estimator=counting_estimate)
        assert [await _chat(proxy.client) for _ in range(20)] == [200] * 20
        assert 4 * len(BODY) < TRIGGER
        assert calls == 0
        # Past the bound (4 * bytes > the trigger) but below the trigger: counted, and sent.
        longer = [*HISTORY, {"role": "user", "content": "a lake " * 400}]
        assert await _chat(proxy.client, longer) == 200
        assert calls > 0


def _adversarial(rng: random.Random) -> str:
    pieces = [
        "1!2@3#4$5%",
        "汉字测试中文",
        "😀🎉",
        "a b c d e ",
        "\n\t  \n",
        "x" * rng.randint(1, 30),
        "ÄÖÜßéè",
        ";;;;",
        '\\"',
        "한국어",
        "カタカナ",
    ]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))


def _message(rng: random.Random) -> dict[str, Any]:
    role = rng.choice(["user", "assistant", "system", "tool"])
    message: dict[str, Any] = {"role": role}
    shape = rng.randint(0, 3)
    if shape == 1:
        message["content"] = _adversarial(rng)
    elif shape == 2:
        message["content"] = [{"type": "text", "text": _adversarial(rng)}]
    elif shape == 3 and role == "assistant":
        call = {"name": _adversarial(rng)[:20] or "f", "arguments": _adversarial(rng)}
        message["tool_calls"] = [{"id": "c1", "type": "function", "function": call}]
        message["reasoning_content"] = _adversarial(rng)
    return message


def test_the_byte_bound_never_lets_a_request_over_the_trigger_through() -> None:
    """For each random history the trigger is set at exactly the bound (4 tokens a byte of
    its most compact JSON): where ``surely_below`` says yes, the real count must agree."""
    rng = random.Random(21)
    said_yes = 0
    for _ in range(400):
        messages = [_message(rng) for _ in range(rng.randint(1, 30))]
        body = json.dumps({"model": "m", "messages": messages}, ensure_ascii=False,
                          separators=(",", ":")).encode()  # fmt: skip
        for limit in (4 * len(body), 4 * len(body) - 1):
            compactor = AsyncCompactor(trigger=Trigger(tokens=limit), counter=TokenCounter())
            if surely_below(compactor, len(body), messages, None):
                said_yes += 1
                assert not compactor.should_compact(messages).fired
    assert said_yes >= 400  # the bound was exercised, not skipped


def test_media_an_unbounded_estimator_or_a_message_trigger_turn_the_shortcut_off() -> None:
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    compactor = AsyncCompactor(trigger=Trigger(tokens=100_000), counter=TokenCounter())
    assert not surely_below(compactor, 60, [image], None)
    custom = AsyncCompactor(trigger=Trigger(tokens=100_000), counter=TokenCounter(estimator=len))
    assert not surely_below(custom, 60, [{"role": "user", "content": "hi"}], None)
    by_count = AsyncCompactor(trigger=Trigger(messages=2), counter=TokenCounter())
    assert not surely_below(by_count, 60, [{"role": "user"}] * 3, None)


# --- one parse, no schema, no copy, no scan on the lean path ---------------------------------


def _instrument(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the body's JSON parses and serializations, the schema's validations, the nesting
    scans and the message copies the proxy makes (each delegating to the real step)."""
    calls: Counter[str] = Counter()

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kw: Any) -> Any:
            calls[name] += 1
            return real(*args, **kw)

        return step

    # The modules' own names of json (the fake upstream parses with the real one).
    monkeypatch.setattr(lean, "json", SimpleNamespace(loads=counted("loads", json.loads)))
    monkeypatch.setattr(proxy_module, "json", SimpleNamespace(dumps=counted("dumps", json.dumps)))
    validate = ChatCompletionRequest.model_validate
    monkeypatch.setattr(lean.ChatCompletionRequest, "model_validate", counted("schema", validate))
    monkeypatch.setattr(limits, "json_depth", counted("scans", limits.json_depth))
    monkeypatch.setattr(
        proxy_module, "public_messages", counted("copies", proxy_module.public_messages)
    )
    return calls


async def test_a_flat_request_below_the_trigger_is_parsed_once_and_forwarded_as_it_came(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serving(tmp_path) as proxy:
        calls = _instrument(monkeypatch)
        headers = {"content-type": "application/json"}
        for _ in range(20):
            answer = await proxy.client.post("/chat/completions", content=BODY, headers=headers)
            assert answer.status_code == 200
        # One JSON parse a request, no schema, no nesting scan, no copy, no serialization:
        # the upstream gets the very bytes the client sent.
        assert calls == Counter(loads=20)
        assert [call.raw for call in proxy.fake.calls[-20:]] == [BODY] * 20


async def test_a_nested_message_goes_through_the_schema_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = [*HISTORY, {"role": "user", "content": [{"type": "text", "text": "and dinner?"}]}]
    async with serving(tmp_path) as proxy:
        calls = _instrument(monkeypatch)
        assert await _chat(proxy.client, parts) == 200
        assert calls == Counter(loads=1, schema=1)


def _flat_variant(rng: random.Random) -> dict[str, Any]:
    """A request near the flat shape: valid, or with one field the schema may refuse."""
    messages: list[Any] = [
        {"role": rng.choice(["user", "assistant"]), "content": _adversarial(rng)}
        for _ in range(rng.randint(0, 4))
    ]
    payload: dict[str, Any] = {"model": "m", "messages": messages}
    odd: list[Any] = [5, 1.5, True, None, "x", "\ud800", [], [{"a": 1}], {"k": "v"}, "robot"]
    where = rng.randint(0, 4)
    if where == 1:
        payload[rng.choice(["model", "stream", "messages", "temperature"])] = rng.choice(odd)
    elif where == 2 and messages:
        field = rng.choice(["role", "content", "name", "tool_call_id", "tool_calls", "extra"])
        rng.choice(messages)[field] = rng.choice(odd)
    elif where == 3 and messages:
        messages[rng.randrange(len(messages))] = rng.choice(odd)
    return payload


def test_a_request_taken_as_flat_is_one_the_schema_accepts_unchanged() -> None:
    rng = random.Random(6)
    flat = refused = 0
    for _ in range(3000):
        payload = _flat_variant(rng)
        raw = json.dumps(payload).encode()
        try:
            checked = ChatCompletionRequest.model_validate(json.loads(raw))
        except ValueError:
            checked = None
            refused += 1
        if lean.flat_request(json.loads(raw), raw):
            flat += 1
            assert checked is not None, payload
            assert checked.model_dump(exclude_unset=True) == json.loads(raw)
    assert flat > 1000 and refused > 300  # both sides exercised


@pytest.mark.parametrize(
    "body",
    [
        b'{"model":"m","messages":[{"role":"user","content":"\\ud800"}]}',
        b'{"model":"m","messages":[{"role":"user","content":"\xed\xa0\x80"}]}',
        b'{"model":"m","messages":[{"role":"user","\\udfff":1}]}',
        b'{"model":"m","messages":[{"role":"user","content":"ok"}],"stream":"true"}',
        b'{"model":"m","messages":[{"role":"user","tool_calls":"none"}]}',
        b'{"model":"m","messages":[]}',
    ],
)
def test_what_the_schema_refuses_is_never_taken_as_flat(body: bytes) -> None:
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate(json.loads(body))
    assert not lean.flat_request(json.loads(body), body)
