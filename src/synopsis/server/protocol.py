"""How the service parses HTTP: uvicorn's httptools protocol with the service's head limit.

httptools (llhttp, in C) costs the proxy far less CPU per request than h11 (measured in
``bench/bench_server.py``), but as uvicorn runs it, it bounds the request head differently:

* it has no limit on headers at all, where h11 stops at its incomplete-event size;
* it refuses a request line whose target passes 64 KiB (httptools' URL parser keeps 16-bit
  offsets), where the API documents query fields (a system prompt, a query) whose
  percent-encoded maximum is longer.

:class:`BoundedHttpTools` keeps its parser and restores what the service promises: a request
line and headers of up to :data:`MAX_REQUEST_HEAD` bytes reach the app (a field too long is
a 422 naming it, not a dropped connection); a head past it is a 400 and the connection is
closed, as soon as that many bytes have arrived (nothing more is buffered). A request
target past 64 KiB has its query string split off before httptools parses the path.
"""

from __future__ import annotations

from typing import Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from synopsis.errors import InvalidInput

__all__ = ["MAX_REQUEST_HEAD", "BoundedHttpTools"]

#: Bytes of request line and headers accepted (uvicorn's h11 default is 16 KiB).
MAX_REQUEST_HEAD: Final = 1 << 20
#: The longest request target httptools' URL parser takes.
_PARSED_URL_LIMIT: Final = 0xFFFF


class BoundedHttpTools(HttpToolsProtocol):
    """See the module docstring."""

    _head_open = False
    _head_bytes = 0  # received since the message began (what httptools may hold)
    _head_parsed = 0  # parsed: request target and headers

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_open:  # the head is still arriving: what httptools holds of it grows
            self._head_bytes += len(data)
            if self._head_bytes > MAX_REQUEST_HEAD and not self.transport.is_closing():
                self._head_open = False
                self.send_400_response("Request head too large.")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_open = True
        self._head_bytes = 0
        self._head_parsed = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and the line's end
        super().on_header(name, value)

    def _count(self, size: int) -> None:
        self._head_parsed += size
        if self._head_parsed > MAX_REQUEST_HEAD:
            # Raised in a parser callback: httptools reports a parser error (uvicorn's 400).
            raise InvalidInput(f"the request head passes {MAX_REQUEST_HEAD} bytes")

    def on_headers_complete(self) -> None:
        self._head_open = False
        query = None
        if len(self.url) > _PARSED_URL_LIMIT and b"?" in self.url:
            self.url, _, query = self.url.partition(b"?")
            query = query.partition(b"#")[0]
        super().on_headers_complete()
        if query is not None:  # the request's task has not started yet: it sees this
            self.scope["query_string"] = query
