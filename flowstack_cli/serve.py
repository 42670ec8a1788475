"""``flowstack serve``: run the batching model server over a model repository.

Also runnable alone: ``python -m flowstack_cli.serve --model-repository models/``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="serve a model repository over KServe v2 (HTTP, gRPC) and TF Serving REST")
    add_arguments(p)
    p.set_defaults(handler=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-repository", type=Path, required=True, help="directory of <name>/<version>/model.flow (or model.onnx, converted as it loads)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--http-port", type=int, default=8000, help="HTTP port; 0 picks a free one, -1 turns HTTP off (default 8000)")
    p.add_argument("--grpc-port", type=int, default=8001, help="gRPC port; 0 picks a free one, -1 turns gRPC off (default 8001)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="run models on NumPy (cpu) or CuPy (gpu) (default cpu)")
    p.add_argument("--poll-interval", type=float, default=5.0,
                   help="seconds between repository scans; 0 loads once and never polls (default 5)")
    p.add_argument("--model-control-mode", choices=("poll", "explicit"), default="poll",
                   help="poll: load what the repository holds and rescan it every --poll-interval; explicit: load "
                        "models only on request (POST /v2/repository/models/NAME/load, gRPC RepositoryModelLoad, "
                        "tritonclient's load_model) and the --load-model ones at start (default poll)")
    p.add_argument("--load-model", action="append", default=[], metavar="NAME",
                   help="with --model-control-mode explicit: a model to load at start ('*' for all); repeatable")
    p.add_argument("--auth-token-env", metavar="VAR",
                   help="name of an environment variable holding a bearer token that every request must carry")
    p.add_argument("--tls-cert", type=Path, help="PEM certificate: serve HTTPS and gRPC over TLS (with --tls-key)")
    p.add_argument("--tls-key", type=Path, help="PEM private key for --tls-cert")
    p.add_argument("--max-request-bytes", type=int, default=64 * 1024 * 1024, help="HTTP body limit in bytes; larger gets 413 (default 64 MiB)")
    p.add_argument("--grpc-max-message-bytes", type=int, default=64 * 1024 * 1024, help="gRPC message size limit in bytes (default 64 MiB)")
    p.add_argument("--drain-timeout", type=float, default=30.0,
                   help="on SIGTERM or SIGINT: seconds from the signal to exit, lame duck included; requests "
                        "under way finish within it (default 30)")
    p.add_argument("--lame-duck", type=float, default=5.0,
                   help="on SIGTERM: seconds to keep serving, not ready, before the listeners close, while load "
                        "balancers take the server out (none after SIGINT; a second signal ends it) (default 5)")
    p.add_argument("--request-timeout", type=float, default=60.0,
                   help="seconds an HTTP client has to send a whole request from its first byte (else 408), and to "
                        "resume reading a response it stopped reading (else the connection is closed); 0 for no limit "
                        "(default 60)")
    p.add_argument("--keep-alive-timeout", type=float, default=5.0,
                   help="seconds an HTTP connection may wait, new or between requests, before it is closed (default 5)")
    p.add_argument("--grpc-idle-timeout", type=float, default=300.0,
                   help="seconds a gRPC connection with no call may stay open; 0 for no limit (default 300)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"), help="(default info)")


def run(args: argparse.Namespace) -> int:
    from serving.server import ServerOptions, configure_logging, serve

    configure_logging(args.log_level)
    token = None
    if args.auth_token_env:
        token = os.environ.get(args.auth_token_env)
        if not token:
            raise ValueError(f"--auth-token-env {args.auth_token_env}: that environment variable is empty or unset")
    if args.load_model and args.model_control_mode != "explicit":
        raise ValueError("--load-model needs --model-control-mode explicit (polling loads every model)")
    options = ServerOptions(
        model_repository=args.model_repository,
        host=args.host,
        http_port=None if args.http_port < 0 else args.http_port,
        grpc_port=None if args.grpc_port < 0 else args.grpc_port,
        device=args.device,
        poll_interval_s=args.poll_interval or None,
        auth_token=token,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        max_request_bytes=args.max_request_bytes,
        grpc_max_message_bytes=args.grpc_max_message_bytes,
        drain_timeout_s=args.drain_timeout,
        lame_duck_s=max(0.0, args.lame_duck),
        model_control_mode=args.model_control_mode,
        startup_models=tuple(args.load_model),
        request_timeout_s=args.request_timeout or None,
        keep_alive_timeout_s=args.keep_alive_timeout,
        grpc_idle_timeout_s=args.grpc_idle_timeout or None,
        onnx_converter=onnx_to_flow,
    )
    try:
        return serve(options)
    except RuntimeError as exc:  # e.g. --device gpu without a GPU
        print(f"flowstack serve: error: {exc}", file=sys.stderr)
        return 2


def onnx_to_flow(data: bytes) -> bytes:
    """A model.onnx's bytes as a .flow's, through the exporter's ONNX import (``flowstack convert``'s),
    so that a repository version holding a model.onnx is served as Triton serves ONNX. Given bytes,
    never a path: a model whose weights lie in external files is refused, and none is read from
    outside the repository."""
    import tempfile

    from exporter.onnx_import import convert_onnx

    with tempfile.TemporaryDirectory(prefix="flowstack-onnx-") as tmp:
        out = Path(tmp) / "model.flow"
        convert_onnx(data, out)
        return out.read_bytes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flowstack serve", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"flowstack serve: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
