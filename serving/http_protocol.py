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

Bytes the parser refuses get a JSON 400 like every other error (``unparsable_request_response``),
written after the answers to the requests pipelined before them, which uvicorn's own 400 cut off;
and a client's EOF (a half-close) no longer closes the connection before those answers are sent.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

try:
    from httptools import HttpParserCallbackError
except ImportError:  # uvicorn speaks h11 then
    HttpParserCallbackError = ()  # type: ignore[assignment, misc]

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


def unparsable_request_response(default_headers: list[tuple[bytes, bytes]], reason: BaseException | None) -> bytes:
    """A whole 400 response to bytes the HTTP parser refused: a JSON error naming the parser's
    complaint, as every other error answer (uvicorn's own is text/plain and says only "Invalid
    HTTP request received."), and closing the connection (no later request can be found in it)."""
    if isinstance(reason, HttpParserCallbackError) and reason.__context__ is not None:
        # "User callback error": what one of uvicorn's parser callbacks raised says what is wrong
        # (a URL too long to parse, say).
        reason = reason.__context__
    detail = f": {reason}" if reason is not None and str(reason) else ""
    body = json.dumps({"error": f"invalid HTTP request{detail}"}).encode()
    head = [b"HTTP/1.1 400 Bad Request\r\n"]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head.append(b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
    return b"".join(head) + body


class HoldHeads:
    """Mixin for a uvicorn HTTP protocol class (httptools' or h11's): its connections write through
    a ``HeadHoldingTransport``, flushed when each response completes, and bytes the parser refuses
    are answered by ``unparsable_request_response`` after the answers to the requests before them."""

    transport: HeadHoldingTransport
    # The 400 for unparsable bytes, held until the requests before them are answered.
    _refusal: bytes | None = None
    # The client has shut down its side (sent EOF): close once the requests before it are answered.
    _client_done = False

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(HeadHoldingTransport(transport, self))  # type: ignore[misc]

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes its parser refuses (called in its ``except`` block, so the
        parser's exception is at hand). uvicorn's own writes it at once and closes the connection:
        with httptools, which parses pipelined requests as they arrive, that lost the answers
        to the complete requests before the bad bytes, still being computed."""
        if self._refusal is not None:
            return  # already refused; the parser fails again on whatever follows
        self._refusal = unparsable_request_response(self.server_state.default_headers, sys.exc_info()[1])  # type: ignore[attr-defined]
        if self._answers_pending():
            self.flow.pause_reading()  # type: ignore[attr-defined]
            return
        self.transport.write(self._refusal)
        self.transport.close()

    def eof_received(self) -> bool | None:
        """The client shut down its sending side, as it may once its requests are sent. uvicorn's
        returns None, and asyncio then closes the connection, losing the answers to the requests
        received whole before the EOF; this keeps it open until they are answered."""
        if self._answers_pending() and self.transport.get_extra_info("sslcontext") is None:  # TLS has no half-close
            self._client_done = True
            return True
        return None

    def _answers_pending(self) -> bool:
        """Whether requests received whole are still to be answered. A request whose body stopped
        short (at bytes the parser refused, or at the client's EOF) is never run when it is still
        queued behind another (httptools' pipeline); running, it ends as uvicorn ends it."""
        cycle = self.cycle  # type: ignore[attr-defined]  # the last request whose head was parsed
        if cycle is None or cycle.response_complete:
            return False
        if not cycle.more_body:
            return True
        pipeline = getattr(self, "pipeline", None)
        if pipeline and pipeline[0][0] is cycle:
            pipeline.popleft()
            return True
        return False

    def on_response_complete(self) -> None:
        self.transport.flush()
        if self._refusal is None and not self._client_done:  # the usual case
            super().on_response_complete()  # type: ignore[misc]
            return
        answered, queued = self.cycle, bool(getattr(self, "pipeline", None))  # type: ignore[attr-defined]
        super().on_response_complete()  # type: ignore[misc]  # starts the next request, if any
        if self.transport.is_closing() or queued:
            return
        cycle = self.cycle  # type: ignore[attr-defined]  # h11 parses a next request only now
        if cycle is not answered and not cycle.response_complete and not cycle.more_body:
            return
        if self._refusal is not None:
            self.transport.write(self._refusal)
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)  # type: ignore[misc]
        self.transport.release()


class CoalescingHTTPProtocol(HoldHeads, AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    """The protocol uvicorn's ``http="auto"`` picks (httptools, else h11), holding heads."""
