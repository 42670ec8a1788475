"""``flowstack serve`` argument handling (the server itself is exercised in test_reliability)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from flowstack_cli import serve

ROOT = Path(__file__).resolve().parents[2]


def test_register_adds_the_serve_subcommand(tmp_path):
    parser = argparse.ArgumentParser(prog="flowstack")
    serve.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", "--model-repository", str(tmp_path), "--http-port", "0", "--grpc-port", "-1",
                              "--device", "cpu", "--poll-interval", "2.5"])
    assert args.handler is serve.run
    assert (args.model_repository, args.host, args.http_port, args.grpc_port) == (tmp_path, "127.0.0.1", 0, -1)
    assert args.poll_interval == 2.5


def test_missing_repository_is_a_clear_error(tmp_path):
    run = subprocess.run([sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(tmp_path / "nope")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "is not a directory" in run.stderr


def test_auth_token_env_must_be_set(tmp_path, monkeypatch):
    monkeypatch.delenv("FLOWSTACK_TEST_TOKEN", raising=False)
    run = subprocess.run([sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(tmp_path),
                          "--auth-token-env", "FLOWSTACK_TEST_TOKEN"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "FLOWSTACK_TEST_TOKEN" in run.stderr
