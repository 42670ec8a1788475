"""uvicorn's HTTP/1.1 protocol, with each response's head and body sent in one socket write.

uvicorn writes a response's status line and headers when the app sends ``http.response.start``
and the body in a second write when it sends ``http.response.body``: two ``send`` calls and two
TCP segments per response, and a client that wakes up twice to read them. Holding the head until
the body follows joins them. Measured at concurrency 64 (HTTP, the serving benchmark's batched
MLP, three alternated runs each): the event loop's thread 93-94 -> 82-84 us of CPU a request,
throughput 8,280-8,400 -> 9,490-9,900 req/s, and the load generator 31 -> 26 us a request.

The head is held only until the next write of the connection, the response's completion, or the
connection's close, so nothing waits on a later event: a bodyless response (HEAD, 204, 304) goes
out when uvicorn completes it, a streamed body's first chunk takes the head along, and an interim
``100 Continue`` (written before the response starts) is never held.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

# A body larger than this goes in its own write rather than being copied behind the head.
JOIN_MAX_BYTES = 64 << 10


class HeadHoldingTransport:
    """Wraps a connection's transport: the first write of each response (its head) is held and
    joined to the write after it. Everything else passes through to the wrapped transport."""

    __slots__ = ("_transport", "_protocol", "_held", "_headed")

    def __init__(self, transport: asyncio.Transport, protocol: Any):
        self._transport = transport
        self._protocol = protocol  # whose ``cycle`` is the request/response in progress
        self._held: bytes | None = None
        self._headed: Any = None  # the cycle whose head was written last

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if len(data) <= JOIN_MAX_BYTES:
                self._transport.write(held + data)
                return
            self._transport.write(held)
        else:
            cycle = self._protocol.cycle
            if cycle is not None and cycle is not self._headed and cycle.response_started:
                self._headed = cycle
                self._held = bytes(data)
                return
        self._transport.write(data)

    def flush(self) -> None:
        """Write the held head, if any."""
        if self._held is not None:
            held, self._held = self._held, None
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HoldHeads:
    """Mixin for a uvicorn HTTP protocol class (httptools' or h11's): its connections write through
    a ``HeadHoldingTransport``, flushed when each response completes."""

    transport: HeadHoldingTransport

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(HeadHoldingTransport(transport, self))  # type: ignore[misc]

    def on_response_complete(self) -> None:
        self.transport.flush()
        super().on_response_complete()  # type: ignore[misc]


class CoalescingHTTPProtocol(HoldHeads, AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    """The protocol uvicorn's ``http="auto"`` picks (httptools, else h11), holding heads."""
