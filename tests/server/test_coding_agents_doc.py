"""Every command in ``docs/coding-agents.md`` runs, in order, against a real ``synopsis serve``.

The doc's sections this page owns run as ``tests/server/test_docs.py`` runs ``server.md``
(the same :class:`~tests.server.test_docs.Reader`); the two providers' URLs become two fake
upstreams, so the test also checks that each request reached the right one with its key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from synopsis.server.testing import FakeUpstream, running
from tests.server.test_docs import _BLOCK, ROOT, Reader, free_port

DOC = ROOT / "docs" / "coding-agents.md"
#: The sections of this page written here (another may add its own, e.g. MCP).
OURS = (
    "Start synopsis with an upstream per provider",
    "Claude Code",
    "Codex and the OpenAI Agents SDK",
    "A chat-completions client",
)


def sections() -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)[1:]:
        title = part.splitlines()[0].strip()
        found[title] = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(part)]
    return found


@pytest.fixture
def fakes(tmp_path: Path) -> Iterator[tuple[Reader, FakeUpstream, FakeUpstream]]:
    openai_fake, anthropic_fake = FakeUpstream(), FakeUpstream()
    with running(openai_fake.app) as openai_url, running(anthropic_fake.app) as anthropic_url:
        port = free_port()
        substitutions = {
            "https://api.openai.com/v1": f"{openai_url}/v1",
            "https://api.anthropic.com/v1": f"{anthropic_url}/v1",
            ":8000": f":{port}",
        }
        reader = Reader(tmp_path, substitutions, openai_fake)
        try:
            yield reader, openai_fake, anthropic_fake
        finally:
            reader.stop()


def test_the_coding_agents_page_runs(fakes: tuple[Reader, FakeUpstream, FakeUpstream]) -> None:
    reader, openai_fake, anthropic_fake = fakes
    found = sections()
    outputs = []
    for title in OURS:
        assert found[title], title
        for language, code in found[title]:
            run = reader.run_sh if language == "sh" else reader.run_python
            outputs.append(run(code))
    text = "\n".join(outputs)
    assert '"owned_by":"anthropic"' in text  # /v1/models lists the file
    assert "echo: Which file defines the router?" in text  # curl, as Claude Code sends it
    assert "echo: Summarize the failing test." in text  # the anthropic SDK
    assert "echo: Why does the build fail?" in text  # the Agents SDK, Responses API
    assert "echo: Explain the stack trace." in text  # chat completions
    key = reader.env["SYNOPSIS_KEY"]
    assert [c.path for c in anthropic_fake.calls] == ["/v1/messages", "/v1/messages"]
    assert {c.headers["x-api-key"] for c in anthropic_fake.calls} == {"sk-ant-your-anthropic-key"}
    assert [c.path for c in openai_fake.calls] == ["/v1/responses", "/v1/chat/completions"]
    assert {c.headers["authorization"] for c in openai_fake.calls} == {"Bearer sk-your-openai-key"}
    for call in (*openai_fake.calls, *anthropic_fake.calls):
        assert key not in str(call.headers) and key not in str(call.body)
