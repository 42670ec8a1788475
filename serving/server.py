"""``InferenceServer``: the repository, the HTTP and gRPC front ends, and graceful shutdown.

``serve(options)`` runs it until SIGTERM or SIGINT, then shuts down as Kubernetes expects, within
``drain_timeout_s`` of the signal, losing no request a client has sent:

1. readiness turns false at once (HTTP ``/v2/health/ready``, gRPC ServerReady and health);
2. a lame-duck period (``lame_duck_s``; none after SIGINT, and a second signal ends it): both front
   ends keep serving, new connections included, while load balancers take the server out; every
   HTTP response now carries ``Connection: close``, so clients move their connections elsewhere;
3. the HTTP listener drops new connection attempts, the connections already in its accept queue
   are accepted, and it closes; the gRPC server stops taking calls (GOAWAY) and lets those under
   way finish;
4. HTTP connections are answered and closed: a request under way, or one arriving on an open
   connection, is answered with ``Connection: close``; an idle connection closes at its
   keep-alive timeout; whatever remains at the drain deadline is closed;
5. the batchers are closed and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import uvicorn
from uvicorn.server import ServerState

from serving.backends import EdgeRuntimeBackend, check_device
from serving.core import InferenceCore
from serving.grpc_server import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_MESSAGE_BYTES, GrpcSettings, create_grpc_front_end
from serving.http_app import DEFAULT_MAX_REQUEST_BYTES, HttpSettings, create_app
from serving.http_protocol import DEFAULT_REQUEST_TIMEOUT_S, CoalescingHTTPProtocol
from serving.listener import drain_accept_queue, refuse_new_connections
from serving.repository import ModelRepository

log = logging.getLogger("flowstack.serving")


@dataclass
class ServerOptions:
    """Everything ``flowstack serve`` can set. Port 0 picks a free port; None turns a front end off."""

    model_repository: Path
    host: str = "127.0.0.1"
    http_port: int | None = 8000
    grpc_port: int | None = 8001
    device: str = "cpu"
    poll_interval_s: float | None = 5.0
    auth_token: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    grpc_max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    drain_timeout_s: float = 30.0
    # After SIGTERM: seconds of serving on, readiness false, before the listeners close (within
    # drain_timeout_s), so that load balancers stop sending new connections first.
    lame_duck_s: float = 5.0
    # "poll": the repository is scanned every poll_interval_s; "explicit": models are loaded and
    # unloaded on request (Triton's model repository extension), those in startup_models at start.
    model_control_mode: str = "poll"
    startup_models: tuple[str, ...] = ()
    # A client's time to send a whole HTTP request from its first byte (else 408), and to start
    # reading a response it has let fill the socket buffer (else the connection is aborted).
    request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S
    # An HTTP connection with no request in progress (new or kept alive) is closed after this.
    keep_alive_timeout_s: float = 5.0
    # A gRPC connection with no call in progress is closed (GOAWAY) after this.
    grpc_idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S
    backend_factory: type = field(default=EdgeRuntimeBackend, repr=False)
    # A model.onnx's bytes -> a .flow's; None: model.onnx versions are refused, naming the fix.
    onnx_converter: Callable[[bytes], bytes] | None = field(default=None, repr=False)


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, shut down by ``InferenceServer``'s rules (see the module docstring) by
    the ``drain_deadline`` (loop time) set before ``should_exit``."""

    drain_deadline: float = 0.0

    def __init__(self, config: uvicorn.Config, state: ServerState):
        super().__init__(config)
        self.server_state = state  # made before the app, which reads its tasks

    @contextlib.contextmanager
    def capture_signals(self):
        yield  # InferenceServer owns the signals and decides when to stop

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        for sock in sockets or []:
            refuse_new_connections(sock)
        for sock in sockets or []:
            await drain_accept_queue(sock, timeout=max(0.0, min(0.5, self.drain_deadline - loop.time())))
        for server in self.servers:
            server.close()
        state = self.server_state
        for connection in list(state.connections):
            cycle = getattr(connection, "cycle", None)
            if cycle is not None and not cycle.response_complete:
                cycle.keep_alive = False  # answered, then closed
        while (state.connections or state.tasks) and loop.time() < self.drain_deadline:
            await asyncio.sleep(0.02)
        if state.connections or state.tasks:
            log.warning("drain timeout: closing %d HTTP connection(s)", len(state.connections),
                        extra={"fields": {"event": "drain_timeout", "connections": len(state.connections)}})
            for connection in list(state.connections):
                connection.transport.close()
            for task in list(state.tasks):
                task.cancel()


class InferenceServer:
    """Start with ``await start()``; ``http_port``/``grpc_port`` are then the bound ports."""

    def __init__(self, options: ServerOptions):
        self.options = options
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        self.repository: ModelRepository | None = None
        self.core: InferenceCore | None = None
        self._http: _Uvicorn | None = None
        self._http_task: asyncio.Task | None = None
        self._grpc = None

    async def start(self) -> None:
        o = self.options
        check_device(o.device)
        if bool(o.tls_cert) != bool(o.tls_key):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        self.repository = ModelRepository(
            o.model_repository, device=o.device, poll_interval_s=o.poll_interval_s, backend_factory=o.backend_factory,
            control_mode=o.model_control_mode, startup_models=o.startup_models, onnx_converter=o.onnx_converter,
        )
        self.core = InferenceCore(self.repository)
        sock = _bind_http(o.host, o.http_port) if o.http_port is not None else None  # before any model loads
        self.repository.start()
        if sock is not None:
            self.http_port = sock.getsockname()[1]
            state = ServerState()
            app = create_app(self.core, HttpSettings(max_request_bytes=o.max_request_bytes, auth_token=o.auth_token),
                             requests_in_progress=state.tasks)
            config = uvicorn.Config(
                app,
                http=CoalescingHTTPProtocol.with_request_timeout(o.request_timeout_s),
                timeout_keep_alive=o.keep_alive_timeout_s,
                # No WebSocket endpoints: an Upgrade request is answered as plain HTTP (404) rather
                # than handed to a WebSocket protocol on the head-holding transport.
                ws="none",
                interface="asgi3",  # the app's __call__ returns its coroutine rather than being one
                log_config=None,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=o.drain_timeout_s,
                backlog=2048,
                # Per-response work nothing here uses: a "server: uvicorn" header, and the
                # X-Forwarded-For rewrite of the client address (no handler reads it).
                server_header=False,
                proxy_headers=False,
                ssl_certfile=str(o.tls_cert) if o.tls_cert else None,
                ssl_keyfile=str(o.tls_key) if o.tls_key else None,
            )
            self._http = _Uvicorn(config, state)
            self._http_task = asyncio.create_task(self._http.serve(sockets=[sock]))
            while not self._http.started:
                if self._http_task.done():
                    self._http_task.result()  # raises the startup error
                    raise RuntimeError("HTTP server stopped during startup")
                await asyncio.sleep(0.01)
        if o.grpc_port is not None:
            settings = GrpcSettings(
                max_message_bytes=o.grpc_max_message_bytes,
                auth_token=o.auth_token,
                idle_timeout_s=o.grpc_idle_timeout_s,
                handshake_timeout_s=o.request_timeout_s,
                tls_cert=o.tls_cert.read_bytes() if o.tls_cert else None,
                tls_key=o.tls_key.read_bytes() if o.tls_key else None,
            )
            host = f"[{o.host}]" if ":" in o.host else o.host
            try:
                self._grpc = create_grpc_front_end(self.core, f"{host}:{o.grpc_port}", settings)
            except RuntimeError as exc:  # grpc's "Failed to bind to address ..."
                raise RuntimeError(f"cannot listen for gRPC on {o.host}:{o.grpc_port} ({exc}); is the port in use? "
                                   "Pick another with --grpc-port (0: any free port; -1: no gRPC)") from None
            self.grpc_port = self._grpc.port
            await self._grpc.server.start()
        log.info("serving", extra={"fields": {
            "event": "serving", "http_port": self.http_port, "grpc_port": self.grpc_port, "host": o.host,
            "model_repository": str(o.model_repository), "device": o.device,
        }})

    async def stop(self, lame_duck: asyncio.Event | None = None) -> None:
        """Shut down (see the module docstring). With ``lame_duck``, serve on, not ready, until it
        is set or ``lame_duck_s`` has passed; without, close the listeners at once."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.options.drain_timeout_s
        if self.core is not None:
            self.core.draining = True
        lame_duck_s = min(self.options.lame_duck_s, self.options.drain_timeout_s)
        if lame_duck is not None and lame_duck_s > 0:
            log.info("lame duck", extra={"fields": {"event": "lame_duck", "seconds": lame_duck_s}})
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(lame_duck.wait(), lame_duck_s)
        waits = []
        if self._http is not None:
            self._http.drain_deadline = deadline
            self._http.should_exit = True
            waits.append(self._http_task)
        if self._grpc is not None:
            waits.append(asyncio.ensure_future(self._grpc.stop(deadline)))
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        if self.repository is not None:
            await loop.run_in_executor(None, self.repository.close, max(0.0, deadline - loop.time()))
        if self.core is not None:
            self.core.shared_memory.close()
        log.info("stopped", extra={"fields": {"event": "stopped", "drain_seconds": round(loop.time() - started, 3)}})


def _bind_http(host: str, port: int) -> socket.socket:
    """The HTTP listening socket, bound; a port in use is a one-line error naming the flag."""
    # proto IPPROTO_TCP (not 0) so asyncio turns on TCP_NODELAY for accepted connections;
    # without it every response pays a ~40 ms Nagle/delayed-ACK stall.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RuntimeError(f"cannot listen for HTTP on {host}:{port}: {exc.strerror}; pick another port with "
                           "--http-port (0: any free port; -1: no HTTP)") from None
    sock.set_inheritable(True)
    return sock


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, plus any ``extra={"fields": {...}}``."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}))
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def configure_logging(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


async def serve_until_signal(options: ServerOptions) -> int:
    """Run the server until SIGTERM/SIGINT, then drain and return 0."""
    server = InferenceServer(options)
    await server.start()
    received: list[int] = []
    stop, lame_duck_over = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: int) -> None:
        received.append(sig)
        if stop.is_set() or sig == signal.SIGINT:  # interactive, or a second signal: no more waiting
            lame_duck_over.set()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    await stop.wait()
    log.info("shutting down", extra={"fields": {"event": "draining", "signal": signal.Signals(received[0]).name}})
    await server.stop(lame_duck_over)
    return 0


def serve(options: ServerOptions) -> int:
    """Blocking entry point used by ``flowstack serve``."""
    return asyncio.run(serve_until_signal(options))
