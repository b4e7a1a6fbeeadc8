"""Many upstreams, chosen by the request's ``model``; one tenant's hung calls never stall another.

Two fakes stand for two providers; ``--upstreams`` files are read by
:func:`synopsis.config.read_upstreams`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest

from synopsis.config import UpstreamSpec, read_upstreams
from synopsis.errors import ConfigError
from synopsis.server.testing import FakeUpstream, running
from tests.server.conftest import Live, StartServer

TOML = """
[upstreams.alpha]
base_url = "{a}"
api_key_env = "ALPHA_KEY"
models = ["alpha-1", "shared-*"]

[upstreams.beta]
base_url = "{b}"
format = "anthropic"
api_key_env = "BETA_KEY"
models = ["beta-*", "shared-long-*"]
"""


@pytest.fixture
def fakes() -> Iterator[tuple[FakeUpstream, FakeUpstream, str, str]]:
    a, b = FakeUpstream(), FakeUpstream()
    with running(a.app) as url_a, running(b.app) as url_b:
        yield a, b, f"{url_a}/v1", f"{url_b}/v1"


@pytest.fixture
def routed(
    start_server: StartServer, tmp_path: Path, fakes: tuple[FakeUpstream, FakeUpstream, str, str]
) -> Iterator[Live]:
    """Only the file's upstreams: no default."""
    _, _, url_a, url_b = fakes
    path = tmp_path / "upstreams.toml"
    path.write_text(TOML.format(a=url_a, b=url_b))
    specs = read_upstreams(path, {"ALPHA_KEY": "sk-alpha", "BETA_KEY": "sk-beta"})
    with start_server(upstream=None, upstreams=specs) as live:
        yield live


def test_the_file_is_read_with_keys_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "upstreams.toml"
    path.write_text(TOML.format(a="http://a/v1", b="https://b/v1"))
    alpha, beta = read_upstreams(path, {"ALPHA_KEY": "sk-alpha", "BETA_KEY": "sk-beta"})
    assert alpha == UpstreamSpec(
        name="alpha", base_url="http://a/v1", api_key="sk-alpha", models=("alpha-1", "shared-*")
    )
    assert (beta.format, beta.api_key) == ("anthropic", "sk-beta")
    assert "sk-alpha" not in repr(alpha)


@pytest.mark.parametrize(
    ("text", "environ", "named"),
    [
        (TOML, {"ALPHA_KEY": "k"}, "BETA_KEY"),  # a key variable unset
        ("[upstreams.x]\nbase_url = 'ftp://x'\nmodels = ['m']\n", {}, "base_url"),
        ("[upstreams.x]\nbase_url = 'http://x'\nmodels = []\n", {}, "models"),
        ("[upstreams.x]\nbase_url = 'http://x'\nmodels = ['m']\nformat = 'grpc'\n", {}, "format"),
        ("[upstreams.x]\nbase_url = 'http://x'\nmodels = ['m']\nkey = 'sk'\n", {}, "key"),
        (
            "[upstreams.x]\nbase_url = 'http://x'\nmodels = ['m']\n"
            "[upstreams.y]\nbase_url = 'http://y'\nmodels = ['m']\n",
            {},
            "'m'",
        ),
        ("upstreams = [", {}, "TOML"),
    ],
)
def test_a_bad_file_is_a_config_error_naming_the_problem(
    tmp_path: Path, text: str, environ: dict[str, str], named: str
) -> None:
    path = tmp_path / "upstreams.toml"
    path.write_text(text.format(a="http://a", b="http://b"))
    with pytest.raises(ConfigError, match=named):
        read_upstreams(path, environ)


def test_models_are_routed_by_name_and_prefix(
    routed: Live, fakes: tuple[FakeUpstream, FakeUpstream, str, str]
) -> None:
    a, b, _, _ = fakes
    key = routed.key("acme")
    with openai.OpenAI(base_url=f"{routed.url}/v1", api_key=key, max_retries=0) as client:
        for model in ("alpha-1", "shared-x"):
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}]
            )
        client.responses.create(model="shared-y", input="hi")
    with routed.client(key) as raw:
        for model in ("beta-2", "shared-long-z"):  # the longest prefix wins
            ask = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
            assert raw.post("/v1/messages", json=ask).status_code == 200
        listed = raw.get("/v1/models").json()
    assert [c.body["model"] for c in a.calls] == ["alpha-1", "shared-x", "shared-y"]
    assert {c.headers["authorization"] for c in a.calls} == {"Bearer sk-alpha"}
    assert [c.body["model"] for c in b.calls] == ["beta-2", "shared-long-z"]
    assert {c.headers["x-api-key"] for c in b.calls} == {"sk-beta"}
    assert [(m["id"], m["owned_by"]) for m in listed["data"]] == [
        ("alpha-1", "alpha"), ("shared-*", "alpha"), ("beta-*", "beta"), ("shared-long-*", "beta"),
    ]  # fmt: skip


def test_an_unknown_model_is_each_formats_own_404(routed: Live) -> None:
    key = routed.key("acme")
    with routed.client(key) as raw:
        one = [{"role": "user", "content": "x"}]
        chat = raw.post("/v1/chat/completions", json={"model": "nope", "messages": one})
        responses = raw.post("/v1/responses", json={"model": "nope", "input": "x"})
        messages = raw.post("/v1/messages", json={"model": "nope", "messages": []})
    assert chat.status_code == responses.status_code == messages.status_code == 404
    assert responses.json()["error"]["type"] == "invalid_request_error"
    assert "nope" in responses.json()["error"]["message"]
    assert messages.json() == {
        "type": "error",
        "error": {
            "type": "not_found_error",
            "message": "the model 'nope' does not exist: no upstream serves it",
        },
    }


def test_a_tenant_whose_calls_hang_never_stalls_another(start_server: StartServer) -> None:
    """Tenant A fills its slots with calls to a hung upstream: its next call is a 429 with
    Retry-After, tenant B is still served; when A's clients give up, the upstream sees each
    of those calls abandoned (the proxy cancelled them) and A's slots are free again."""
    fake = FakeUpstream()
    slots = 4
    hi = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with (
        running(fake.app) as url,
        start_server(upstream=f"{url}/v1", upstream_concurrency=slots) as live,
    ):
        key_a, key_b = live.key("tenant-a"), live.key("tenant-b")

        async def until(check: Callable[[], bool]) -> None:
            for _ in range(600):  # a deadline of 30 s, not a timing assertion
                if check():
                    return
                await asyncio.sleep(0.05)
            raise AssertionError("timed out")

        async def run() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
            def client(key: str) -> httpx.AsyncClient:
                auth = {"Authorization": f"Bearer {key}"}
                return httpx.AsyncClient(base_url=live.url, headers=auth, timeout=60)

            async with client(key_a) as a, client(key_b) as b:
                hung = {**hi, "model": "hang"}
                calls = [
                    asyncio.ensure_future(a.post("/v1/chat/completions", json=hung))
                    for _ in range(slots)
                ]
                await until(lambda: fake.hanging == slots)
                over = await a.post("/v1/chat/completions", json=hi)
                served = await b.post("/v1/chat/completions", json=hi)
                for call in calls:  # A's clients give up: their connections close
                    call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
                await until(lambda: fake.abandoned == slots and fake.hanging == 0)
                again = await a.post("/v1/chat/completions", json=hi)
            return over, served, again

        over, served, again = asyncio.run(run())
    assert over.status_code == 429 and over.headers["retry-after"] == "1"
    assert "too many upstream calls" in over.json()["error"]["message"]
    assert served.status_code == 200
    assert again.status_code == 200
