"""uvicorn's HTTP/1.1 protocol, with each response's head and body sent in one socket write.

uvicorn writes a response's status line and headers when the app sends ``http.response.start``
and the body in a second write when it sends ``http.response.body``: two ``send`` calls and two
TCP segments per response, and a client that wakes up twice to read them. Holding the head until
the body follows joins them. Measured at concurrency 64 (HTTP, the serving benchmark's batched
MLP, alternated runs, without -> with): throughput 8,570-9,580 -> 8,870-10,300 req/s, p99
unchanged; in two later pairs the event loop's thread 81.5 -> 78.4 and 94.7 -> 90.2 us of CPU a
request, the load generator 26.7 -> 24.5 and 32.7 -> 29.3 us.

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
    joined to the write after it. Everything else passes through to the wrapped transport.

    It keeps no reference to a request's objects (holding the last response's cycle kept each
    request's objects alive one request longer, and the garbage collector's extra work showed up
    as a 1.5x p99 latency), and lets go of its protocol when the connection is lost."""

    __slots__ = ("_transport", "_protocol", "_held", "_await_head")

    def __init__(self, transport: asyncio.Transport, protocol: Any):
        self._transport = transport
        self._protocol = protocol  # whose ``cycle`` is the request/response in progress
        self._held: bytes | None = None
        self._await_head = True  # no write yet since the connection opened or the last response ended

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if len(data) <= JOIN_MAX_BYTES:
                self._transport.write(held + data)
                return
            self._transport.write(held)
        elif self._await_head and self._protocol is not None:
            cycle = self._protocol.cycle
            if cycle is not None and cycle.response_started:  # not an interim 100 Continue
                self._await_head = False
                self._held = data
                return
        self._transport.write(data)

    def flush(self) -> None:
        """Write the held head, if any; the next response's first write is its head."""
        self._await_head = True
        if self._held is not None:
            held, self._held = self._held, None
            self._transport.write(held)

    def release(self) -> None:
        """The connection is gone: drop what is held and the protocol (a reference cycle)."""
        self._held = None
        self._protocol = None

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

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)  # type: ignore[misc]
        self.transport.release()


class CoalescingHTTPProtocol(HoldHeads, AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    """The protocol uvicorn's ``http="auto"`` picks (httptools, else h11), holding heads."""
