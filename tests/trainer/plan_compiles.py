"""Counts the plans a Session compiles, so tests can check its plan cache by behaviour."""

from __future__ import annotations

import pytest

import trainer.session


def count_compiles(monkeypatch: pytest.MonkeyPatch) -> list:
    """Patch the Session's plan compiler to record the fetch list of each compile; returns the record."""
    compiled = []
    compile_plan = trainer.session.compile_plan

    def counting(graph, fetch_tensors, *args, **kwargs):
        compiled.append(list(fetch_tensors))
        return compile_plan(graph, fetch_tensors, *args, **kwargs)

    monkeypatch.setattr(trainer.session, "compile_plan", counting)
    return compiled
