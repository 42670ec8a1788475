"""uvicorn's HTTP/1.1 protocol, with each response's head and body sent in one socket write.

uvicorn writes a response's head and body in two ``send`` calls, two TCP segments a client
wakes up twice to read; holding the head until the body follows joins them, which saves CPU on
both ends (figures: benchmarks/RESULTS.md, "Figures behind the code's choices").

The head is held only until the next write of the connection, the response's completion, or the
connection's close, so nothing waits on a later event: a bodyless response (HEAD, 204, 304) goes
out when uvicorn completes it, a streamed body's first chunk takes the head along, and an interim
``100 Continue`` (written before the response starts) is never held.

Bytes the parser refuses get a JSON 400 like every other error (``unparsable_request_response``),
written after the answers to the requests pipelined before them, which uvicorn's own 400 cut off;
and a client's EOF (a half-close) no longer closes the connection before those answers are sent.

Slow and stuck clients are bounded (uvicorn bounds none of these: it times out only the wait
between a response and the next request's first byte). A connection that sends nothing is closed
after the keep-alive timeout, as an idle kept-alive one is; a request must arrive whole (head and
body) within ``request_timeout_s`` of its first byte, or it gets a JSON 408 and the connection is
closed; and a client that reads nothing while a response waits to be written (the transport's
buffer over its high-water mark) for ``request_timeout_s`` has its connection aborted. A head
over ``MAX_HEAD_BYTES`` gets a JSON 431.

A request received whole in one read, when nothing else waits in that turn of the event loop,
starts at once, in ``data_received``, rather than as a task the loop runs at its next turn: its
application runs in a copy of the context, as a task's would, and where it finishes without
waiting (an inference run alone, ``handoff.submit``) there is no task at all; where it waits, a
task takes it from there (``_resumed``). At concurrency 1 that spares a task, a turn of the loop
and its poll of the sockets a request (benchmarks/RESULTS.md, session 15). Where other reads wait
in the same turn (concurrent clients), it starts as a task, as uvicorn starts it, so that the
requests of that turn see each other and are batched together. httptools' protocol only:
uvicorn's h11 protocol starts its tasks itself.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import sys
from typing import Any, Coroutine

from uvicorn.protocols.http.auto import AutoHTTPProtocol

try:
    from httptools import HttpParserCallbackError
except ImportError:  # uvicorn speaks h11 then
    HttpParserCallbackError = ()  # type: ignore[assignment, misc]

log = logging.getLogger("flowstack.serving")

# A body larger than this goes in its own write rather than being copied behind the head.
JOIN_MAX_BYTES = 64 << 10
DEFAULT_REQUEST_TIMEOUT_S = 60.0
# A request head (request line and headers) longer than this gets a 431. httptools sets no limit
# of its own (h11 does: uvicorn's 16 KiB), and grows a header value by copying it whole for each
# piece received, so a client sending one endless header took memory and the event loop's time.
MAX_HEAD_BYTES = 64 << 10


def head_size(scope: dict) -> int:
    """The bytes of a parsed request head (request line and headers, as sent but for spacing
    around the colons), from its ASGI scope."""
    line = len(scope["method"]) + len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + 13
    return line + sum(len(name) + len(value) + 4 for name, value in scope["headers"]) + 2


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

    def is_closing(self) -> bool:
        # Asked once a response (by uvicorn, as it completes): spelled out, not found by
        # ``__getattr__`` after a failed lookup (0.41 -> 0.12 us, timeit).
        return self._transport.is_closing()

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
    return closing_error_response(b"400 Bad Request", default_headers, f"invalid HTTP request{detail}")


def closing_error_response(status: bytes, default_headers: list[tuple[bytes, bytes]], message: str) -> bytes:
    """A whole JSON error response that closes the connection, written by the protocol itself."""
    body = json.dumps({"error": message}).encode()
    head = [b"HTTP/1.1 " + status + b"\r\n"]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head.append(b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
    return b"".join(head) + body


def _loop_has_more_to_run(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether callbacks other than the running one wait in this turn of ``loop`` (asyncio's own
    loop keeps them in ``_ready``; a loop without one is taken to have more)."""
    ready = getattr(loop, "_ready", None)
    return ready is None or len(ready) > 0


class _StartedInRead:
    """Stands in uvicorn's task set for a request running in ``data_received``, so that the set
    counts it (``HttpHandlers.alone``) as it counts a task."""

    __slots__ = ()


async def _resumed(coro: Coroutine, awaiting: Any) -> Any:
    """The rest of ``coro``, whose first step ran outside a task and stopped awaiting ``awaiting``.
    A native coroutine: asyncio's tasks take no generator-based ones from Python 3.12 on."""
    return await _RestOf(coro, awaiting)


class _RestOf:
    """``await`` written out for a coroutine already started (which cannot be awaited itself):
    sends, throws and closing are passed on."""

    __slots__ = ("coro", "awaiting")

    def __init__(self, coro: Coroutine, awaiting: Any):
        self.coro, self.awaiting = coro, awaiting

    def __await__(self):
        coro, awaiting = self.coro, self.awaiting
        while True:
            try:
                sent = yield awaiting
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a task's cancellation, say: thrown in where it waits
                try:
                    awaiting = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    awaiting = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


class HoldHeads:
    """Mixin for a uvicorn HTTP protocol class (httptools' or h11's): its connections write through
    a ``HeadHoldingTransport``, flushed when each response completes, and bytes the parser refuses
    are answered by ``unparsable_request_response`` after the answers to the requests before them;
    a request received whole in one read starts in it (httptools' only; see the module docstring)."""

    transport: HeadHoldingTransport
    # Seconds a client has to send a whole request from its first byte, and to take a response
    # it has stopped reading (None: unbounded, as uvicorn). ``with_request_timeout`` sets it.
    request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S
    # The 400 for unparsable bytes, held until the requests before them are answered.
    _refusal: bytes | None = None
    # The client has shut down its side (sent EOF): close once the requests before it are answered.
    _client_done = False
    _write_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0  # bytes received into a head not yet complete
    # Bytes received since the read that completed the last head, that read included: a bound on
    # the size of the next head, which is measured only where the bound passes the limit.
    _bytes_since_head = 0
    _reading = False  # in ``data_received``: a request's start waits for the end of the read
    _to_start: tuple | None = None  # (cycle, app) of the request whose head that read completed

    @classmethod
    def with_request_timeout(cls, seconds: float | None) -> type:
        """This protocol class with ``request_timeout_s`` set (uvicorn takes a class, not an instance)."""
        return type(cls.__name__, (cls,), {"request_timeout_s": seconds})

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(HeadHoldingTransport(transport, self))  # type: ignore[misc]
        # uvicorn arms its keep-alive timer only once a response is done, so a connection that
        # never sends a byte was held forever: wait for the first request as for any later one.
        self._arm_wait(self.timeout_keep_alive)  # type: ignore[attr-defined]

    # uvicorn's keep-alive timer, armed as each response completes, also times the request that
    # follows: bytes arriving no longer cancel it (uvicorn's ``_unset_keepalive_if_required``, on
    # every ``data_received``, only notes when the first came), and when it fires it closes an
    # idle connection, or waits out the rest of ``request_timeout_s`` from that first byte. So a
    # request costs no timer beyond the one uvicorn already made.
    _request_began: float | None = None  # loop time of the first byte since the wait began

    def _arm_wait(self, delay: float) -> None:
        self.timeout_keep_alive_task = self.loop.call_later(delay, self.timeout_keep_alive_handler)  # type: ignore[attr-defined]

    def _unset_keepalive_if_required(self) -> None:
        if self._request_began is None:
            self._request_began = self.loop.time()  # type: ignore[attr-defined]

    def _end_wait(self) -> None:
        task = self.timeout_keep_alive_task  # type: ignore[attr-defined]
        if task is not None:
            task.cancel()
            self.timeout_keep_alive_task = None
        self._request_began = None

    def timeout_keep_alive_handler(self) -> None:
        """The wait for a request is over: close an idle connection (as uvicorn); for a request
        begun, wait for the rest of its time; for one received whole (being answered), nothing:
        its response re-arms the wait."""
        self.timeout_keep_alive_task = None
        if self.transport.is_closing():
            return
        began = self._request_began
        if began is None:
            self.transport.close()
            return
        cycle = self.cycle  # type: ignore[attr-defined]
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            return
        if self.request_timeout_s is None:
            return
        remaining = began + self.request_timeout_s - self.loop.time()  # type: ignore[attr-defined]
        if remaining > 0:
            self._arm_wait(remaining)
            return
        if cycle is not None and not cycle.response_complete:  # its body is still to come
            cycle.disconnected = True  # the app's receive() returns a disconnect, ending its task
            cycle.message_event.set()
            if cycle.response_started:  # answered before its body came: no room for a 408
                self.transport.close()
                return
        self._refuse(b"408 Request Timeout", f"request not received whole within {self.request_timeout_s} s")

    def data_received(self, data: bytes) -> None:
        before = self.cycle  # type: ignore[attr-defined]
        in_body = before is not None and before.more_body and not before.response_complete
        self._reading = True
        try:
            super().data_received(data)  # type: ignore[misc]
        finally:
            self._reading = False
        cycle = self.cycle  # type: ignore[attr-defined]
        bound = self._bytes_since_head + len(data)
        if cycle is not before:  # a head completed in this read: measured whole, wherever it began
            self._head_bytes = 0
            self._bytes_since_head = len(data)  # the next head may begin in this read
            if bound > MAX_HEAD_BYTES and head_size(cycle.scope) > MAX_HEAD_BYTES and not self.transport.is_closing():
                # Its application is started: what it answers goes nowhere, and it reads a disconnect.
                cycle.disconnected = True
                cycle.message_event.set()
                self._refuse_head()
            if self._to_start is not None:
                self._start_read_request()
            return
        self._bytes_since_head = bound
        if in_body:
            self._head_bytes = 0
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self._refuse_head()

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        """uvicorn's start of a request's application: one whose head completes in a read waits
        for the end of that read (``_start_read_request``); others (pipelined ones, started as the
        response before them completes) start as uvicorn starts them."""
        if self._reading and self._to_start is None:
            self._to_start = (cycle, app)
            return
        super()._start_asgi_task(cycle, app)  # type: ignore[misc]

    def _start_read_request(self) -> None:
        """Start the request whose head the last read completed: received whole, with nothing else
        waiting in this turn of the loop, its application's first step runs here; else, or where
        that step waits, in a task."""
        cycle, app = self._to_start  # type: ignore[misc]
        self._to_start = None
        if cycle.more_body or _loop_has_more_to_run(self.loop):  # type: ignore[attr-defined]
            # The rest of its body is still to come; or other reads (requests of other connections)
            # wait in this turn of the loop: as a task, it starts after them, and finds them in
            # uvicorn's task set, to be batched with (``HttpHandlers.alone``).
            super()._start_asgi_task(cycle, app)  # type: ignore[misc]
            return
        # What uvicorn's task would run it in (an empty context where uvicorn is told to reset them).
        reset = getattr(self.config, "reset_contextvars", False)  # type: ignore[attr-defined]
        context = contextvars.Context() if reset else contextvars.copy_context()
        coro = cycle.run_asgi(app)
        tasks = self.tasks  # type: ignore[attr-defined]
        marker = _StartedInRead()
        tasks.add(marker)
        try:
            awaiting = context.run(coro.send, None)
        except StopIteration:  # answered (run_asgi answers every failure of the application too)
            return
        finally:
            tasks.discard(marker)
        task = self.loop.create_task(_resumed(coro, awaiting), context=context)  # type: ignore[attr-defined]
        task.add_done_callback(tasks.discard)
        tasks.add(task)

    def _refuse_head(self) -> None:
        self._refuse(b"431 Request Header Fields Too Large", f"request head is over {MAX_HEAD_BYTES} bytes")

    def _refuse(self, status: bytes, message: str) -> None:
        """Answer ``status`` with ``message`` and close (no request in this connection is answered after it)."""
        log.warning("%s; answering %s", message, status.decode(),
                    extra={"fields": {"event": "request_refused", "client": str(self.client)}})  # type: ignore[attr-defined]
        self.transport.write(closing_error_response(status, self.server_state.default_headers, message))  # type: ignore[attr-defined]
        self.transport.close()

    def pause_writing(self) -> None:
        """The transport's buffer is full: the client is not reading. Give it ``request_timeout_s``."""
        super().pause_writing()  # type: ignore[misc]
        if self.request_timeout_s is not None and self._write_timer is None:
            self._write_timer = self.loop.call_later(self.request_timeout_s, self._write_stalled)  # type: ignore[attr-defined]

    def resume_writing(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        super().resume_writing()  # type: ignore[misc]

    def _write_stalled(self) -> None:
        """The client read nothing for ``request_timeout_s``: abort, which also releases the
        request task waiting to write (uvicorn's send waits for the buffer to drain, forever)."""
        self._write_timer = None
        log.warning("client read no response bytes within %s s; closing the connection", self.request_timeout_s,
                    extra={"fields": {"event": "write_timeout", "client": str(self.client)}})  # type: ignore[attr-defined]
        self.transport.abort()

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
        self._end_wait()
        if self._refusal is None and not self._client_done:  # the usual case
            before = self.cycle  # type: ignore[attr-defined]
            super().on_response_complete()  # type: ignore[misc]
            if self.timeout_keep_alive_task is None:  # type: ignore[attr-defined]
                if not self.transport.is_closing():  # httptools started a pipelined request, arming no wait
                    self._request_began = self.loop.time()  # type: ignore[attr-defined]
                    self._arm_wait(self.request_timeout_s or self.timeout_keep_alive)  # type: ignore[attr-defined]
            elif self.cycle is before:  # type: ignore[attr-defined]
                self._request_began = None  # idle: the next byte begins a request (h11 may have begun one)
            return
        answered, queued = self.cycle, bool(getattr(self, "pipeline", None))  # type: ignore[attr-defined]
        super().on_response_complete()  # type: ignore[misc]  # starts the next request, if any
        self._request_began = None
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
        self._end_wait()
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        self.transport.release()


class CoalescingHTTPProtocol(HoldHeads, AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    """The protocol uvicorn's ``http="auto"`` picks (httptools, else h11), holding heads."""
