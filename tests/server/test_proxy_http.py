"""The service's HTTP parser (httptools, bounded; ``synopsis.server.protocol``): a request head
up to 1 MiB reaches the app whole, a longer one is a 400 and the connection closes."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from starlette.types import Receive, Scope, Send

from synopsis.server.options import UVICORN_HTTP
from synopsis.server.protocol import MAX_REQUEST_HEAD
from synopsis.server.testing import running


async def _echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers with what it was given: path, query string length, header bytes."""
    if scope["type"] != "http":
        return
    headers = sum(len(value) for _, value in scope["headers"])
    body = f"{scope['path']}|{len(scope['query_string'])}|{headers}".encode()
    length = [(b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": length})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    with running(_echo, lifespan="off") as url:
        host, port = url.removeprefix("http://").split(":")
        yield host, int(port)


def _exchange(address: tuple[str, int], request: bytes) -> tuple[bytes, bytes]:
    """The status line and body of the answer to ``request`` (the server closes after it)."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(request.replace(b"Host: h\r\n", b"Host: h\r\nConnection: close\r\n"))
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], body


def test_the_service_parses_with_the_bounded_httptools_protocol() -> None:
    assert UVICORN_HTTP == {"http": "synopsis.server.protocol:BoundedHttpTools"}


@pytest.mark.parametrize("size", [70_000, MAX_REQUEST_HEAD - 1000])
def test_a_long_query_string_reaches_the_app(address: tuple[str, int], size: int) -> None:
    """Past httptools' own 64 KiB request-target limit, up to the head limit."""
    request = b"GET /v1/x%20y?q=" + b"a" * size + b" HTTP/1.1\r\nHost: h\r\n\r\n"
    status, body = _exchange(address, request)
    assert status == b"HTTP/1.1 200 OK"
    assert body == f"/v1/x y|{size + 2}|6".encode()


def test_a_long_header_reaches_the_app(address: tuple[str, int]) -> None:
    size = MAX_REQUEST_HEAD - 1000
    request = b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + b"a" * size + b"\r\n\r\n"
    assert _exchange(address, request) == (b"HTTP/1.1 200 OK", f"/|0|{size + 6}".encode())


@pytest.mark.parametrize("where", ["target", "header", "many headers"])
def test_a_head_past_the_limit_is_400(address: tuple[str, int], where: str) -> None:
    size = MAX_REQUEST_HEAD + 1000
    if where == "target":
        request = b"GET /?q=" + b"a" * size + b" HTTP/1.1\r\nHost: h\r\n\r\n"
    elif where == "header":
        request = b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + b"a" * size + b"\r\n\r\n"
    else:
        lines = b"".join(b"X-%d: %s\r\n" % (i, b"a" * 1000) for i in range(size // 1000))
        request = b"GET / HTTP/1.1\r\nHost: h\r\n" + lines + b"\r\n"
    status, _ = _exchange(address, request)
    assert status == b"HTTP/1.1 400 Bad Request"


def test_an_endless_header_is_refused_once_it_passes_the_limit(address: tuple[str, int]) -> None:
    """Nothing past the limit is buffered: the 400 comes while the header is still open.

    The server closes once it has answered, so the client may instead see its own sending
    reset (the kernel answers data a closed socket still receives with a reset, which can
    also discard the 400 before it is read); that must come only past the limit."""
    sent = 0
    with socket.create_connection(address, timeout=10) as sock:
        try:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: h\r\nX-Long: ")
            for _ in range(MAX_REQUEST_HEAD // 65536 + 2):
                sock.sendall(b"a" * 65536)
                sent += 65536
            answer = sock.recv(200)
        except ConnectionResetError:
            assert sent >= MAX_REQUEST_HEAD - 65536, sent  # refused at the limit, not before
            return
        assert answer.startswith(b"HTTP/1.1 400 Bad Request")
