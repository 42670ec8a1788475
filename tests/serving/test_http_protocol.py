"""uvicorn's protocol on a head-holding transport: one write per response, nothing held past its turn."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn
from uvicorn.server import ServerState

from uvicorn.protocols.http.h11_impl import H11Protocol

from serving.http_protocol import JOIN_MAX_BYTES, CoalescingHTTPProtocol, HeadHoldingTransport, HoldHeads


class H11HoldingHeads(HoldHeads, H11Protocol):
    """The same on uvicorn's h11 protocol, which it picks where httptools is not installed."""


PROTOCOLS = [pytest.param(CoalescingHTTPProtocol, id="auto"), pytest.param(H11HoldingHeads, id="h11")]


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.closed_by_server = False

    def write(self, data) -> None:
        if data:  # as asyncio's transports, which send nothing for an empty write
            self.writes.append(bytes(data))

    def get_extra_info(self, name, default=None):
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def app(scope, receive, send) -> None:
    """Echoes the request body; /big answers JOIN_MAX_BYTES + 1 bytes; /empty answers 204."""
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if scope["path"] == "/empty":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    answer = b"x" * (JOIN_MAX_BYTES + 1) if scope["path"] == "/big" else b"echo:" + body
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(answer))]})
    await send({"type": "http.response.body", "body": answer})


def connect(protocol_class) -> tuple:
    config = uvicorn.Config(app, http=protocol_class, lifespan="off", log_config=None, access_log=False)
    config.load()
    protocol = protocol_class(config=config, server_state=ServerState(), app_state={})
    transport = RecordingTransport()
    protocol.connection_made(transport)
    return protocol, transport


async def exchange(protocol_class, *requests: bytes, settle: int = 20) -> RecordingTransport:
    protocol, transport = connect(protocol_class)
    for request in requests:
        protocol.data_received(request)
        for _ in range(settle):
            await asyncio.sleep(0)
    transport.closed_by_server = transport.closed
    protocol.connection_lost(None)
    return transport


def run(protocol_class, *requests: bytes) -> RecordingTransport:
    return asyncio.run(exchange(protocol_class, *requests))


@pytest.mark.parametrize("protocol_class", PROTOCOLS)
def test_each_response_is_one_write_on_a_kept_alive_connection(protocol_class) -> None:
    t = run(protocol_class, b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi",
            b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nyou")
    assert len(t.writes) == 2
    assert t.writes[0].startswith(b"HTTP/1.1 200 OK\r\n") and t.writes[0].endswith(b"\r\n\r\necho:hi")
    assert t.writes[1].startswith(b"HTTP/1.1 200 OK\r\n") and t.writes[1].endswith(b"\r\n\r\necho:you")
    assert not t.closed_by_server


@pytest.mark.parametrize("protocol_class", PROTOCOLS)
def test_bodyless_responses_are_not_held(protocol_class) -> None:
    head = run(protocol_class, b"HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n")
    assert len(head.writes) == 1 and head.writes[0].startswith(b"HTTP/1.1 200 OK") and head.writes[0].endswith(b"\r\n\r\n")
    empty = run(protocol_class, b"GET /empty HTTP/1.1\r\nHost: x\r\n\r\n")
    assert len(empty.writes) == 1 and empty.writes[0].startswith(b"HTTP/1.1 204")


@pytest.mark.parametrize("protocol_class", PROTOCOLS)
def test_interim_100_continue_goes_out_before_the_body_arrives(protocol_class) -> None:
    async def scenario() -> RecordingTransport:
        protocol, transport = connect(protocol_class)
        protocol.data_received(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        for _ in range(20):
            await asyncio.sleep(0)
        assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]  # the client waits for this
        protocol.data_received(b"ok")
        for _ in range(20):
            await asyncio.sleep(0)
        protocol.connection_lost(None)
        return transport

    t = asyncio.run(scenario())
    assert len(t.writes) == 2 and t.writes[1].endswith(b"echo:ok")


@pytest.mark.parametrize("protocol_class", PROTOCOLS)
def test_large_bodies_are_written_apart_from_their_head(protocol_class) -> None:
    t = run(protocol_class, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    assert len(t.writes) == 2 and t.writes[0].endswith(b"\r\n\r\n") and len(t.writes[1]) == JOIN_MAX_BYTES + 1


@pytest.mark.parametrize("protocol_class", PROTOCOLS)
def test_closing_the_connection_sends_the_held_head_first(protocol_class) -> None:
    t = run(protocol_class, b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert t.closed_by_server and len(t.writes) == 1 and t.writes[0].endswith(b"echo:")


async def waiting_app(scope, receive, send) -> None:
    """Answers after the future in scope["state"]["gate"] resolves (its value, or its error's words),
    with bare yields to the loop around the wait."""
    await receive()
    await asyncio.sleep(0)
    try:
        answer = await scope["state"]["gate"]
    except ValueError as exc:
        answer = f"failed: {exc}".encode()
    await asyncio.sleep(0)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(answer))]})
    await send({"type": "http.response.body", "body": answer})


def test_a_request_received_whole_is_answered_in_its_read() -> None:
    async def scenario() -> None:
        protocol, transport = connect(CoalescingHTTPProtocol)
        protocol.data_received(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        assert len(transport.writes) == 1 and transport.writes[0].endswith(b"echo:hi")  # no turn of the loop
        assert not protocol.tasks  # nor a task
        protocol.data_received(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nyo")
        assert len(transport.writes) == 1 and len(protocol.tasks) == 1  # its body's last byte is to come
        protocol.data_received(b"u")
        for _ in range(20):
            await asyncio.sleep(0)
        assert transport.writes[1].endswith(b"echo:you") and not protocol.tasks
        protocol.connection_lost(None)

    asyncio.run(scenario())


def test_requests_read_in_the_same_turn_of_the_loop_start_as_tasks() -> None:
    """Other reads waiting in the turn: each request becomes a task, started after them all, so that
    concurrent requests find each other (to be batched) instead of running one by one in their reads."""

    async def scenario() -> None:
        (first, one), (second, two) = connect(CoalescingHTTPProtocol), connect(CoalescingHTTPProtocol)
        loop = asyncio.get_running_loop()
        loop.call_soon(first.data_received, b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n1")
        loop.call_soon(second.data_received, b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n2")
        await asyncio.sleep(0)  # the turn that runs both reads, then this
        assert not one.writes and not two.writes and len(first.tasks) == len(second.tasks) == 1
        for _ in range(20):
            await asyncio.sleep(0)
        assert one.writes[-1].endswith(b"echo:1") and two.writes[-1].endswith(b"echo:2")
        first.connection_lost(None)
        second.connection_lost(None)

    asyncio.run(scenario())


@pytest.mark.parametrize("outcome", ["value", "error", "cancel"])
def test_a_request_that_waits_is_finished_by_a_task(outcome) -> None:
    """Its first step ran in the read; the task resumes it where it waits, passing on the value, the
    error or the cancellation that ends the wait (uvicorn answers a cancelled request with a 500)."""

    async def scenario() -> list[bytes]:
        config = uvicorn.Config(waiting_app, http=CoalescingHTTPProtocol, lifespan="off", log_config=None, access_log=False)
        config.load()
        gate = asyncio.get_running_loop().create_future()
        protocol = CoalescingHTTPProtocol(config=config, server_state=ServerState(), app_state={"gate": gate})
        transport = RecordingTransport()
        protocol.connection_made(transport)
        protocol.data_received(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        for _ in range(5):
            await asyncio.sleep(0)
        assert not transport.writes and len(protocol.tasks) == 1
        (task,) = protocol.tasks
        if outcome == "value":
            gate.set_result(b"opened")
        elif outcome == "error":
            gate.set_exception(ValueError("no entry"))
        else:
            task.cancel()
        await asyncio.wait_for(asyncio.shield(task), 5)
        assert not protocol.tasks
        protocol.connection_lost(None)
        return transport.writes

    writes = asyncio.run(scenario())
    answer = {"value": b"\r\n\r\nopened", "error": b"\r\n\r\nfailed: no entry", "cancel": b"Internal Server Error"}[outcome]
    assert len(writes) == 1 and writes[0].endswith(answer)


def test_pipelined_requests_in_one_read_are_answered_in_order() -> None:
    t = run(CoalescingHTTPProtocol, b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n1"
                                    b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n2"
                                    b"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n3")
    sent = b"".join(t.writes)
    assert sent.count(b"HTTP/1.1 200 OK") == 3 and sent.index(b"echo:1") < sent.index(b"echo:2") < sent.index(b"echo:3")


def test_the_wrapper_holds_only_a_started_responses_first_write() -> None:
    class Cycle:
        response_started = False

    class Protocol:
        cycle = None

    inner, protocol = RecordingTransport(), Protocol()
    wrapper = HeadHoldingTransport(inner, protocol)
    wrapper.write(b"no cycle yet")
    protocol.cycle = Cycle()
    wrapper.write(b"not started")
    protocol.cycle.response_started = True
    wrapper.write(b"head|")
    assert inner.writes == [b"no cycle yet", b"not started"]
    wrapper.write(b"body")
    wrapper.write(b"more body")
    assert inner.writes[2:] == [b"head|body", b"more body"]
    wrapper.flush()  # the response completed: the next response's first write is its head
    wrapper.write(b"head2|")
    wrapper.flush()  # a bodyless response
    assert inner.writes[4:] == [b"head2|"]
    assert wrapper.get_extra_info("sockname") == ("127.0.0.1", 8000)  # everything else passes through
    wrapper.release()  # connection lost: nothing held any more, and no protocol to ask
    wrapper.write(b"late")
    assert inner.writes[5:] == [b"late"]
    wrapper.abort()
    assert inner.closed


@pytest.mark.timeout(30)
def test_a_real_server_answers_head_and_body_in_one_segment() -> None:
    """On loopback a response of a few hundred bytes written at once arrives in one recv."""
    async def main() -> list[bytes]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(app, http=CoalescingHTTPProtocol, lifespan="off", log_config=None, access_log=False)
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(*sock.getsockname())
        chunks = []
        for _ in range(3):
            writer.write(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nping")
            chunks.append(await asyncio.wait_for(reader.read(65536), 10))
        writer.close()
        server.should_exit = True
        await task
        return chunks

    for chunk in asyncio.run(main()):
        assert chunk.startswith(b"HTTP/1.1 200 OK\r\n") and chunk.endswith(b"\r\n\r\necho:ping")
