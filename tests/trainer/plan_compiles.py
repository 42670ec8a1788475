"""Records the plans a Session compiles, so tests can check its plan cache and plans by behaviour."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import trainer.session


@dataclass
class CompiledPlan:
    fetches: list
    plan: object


def count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[CompiledPlan]:
    """Patch the Session's plan compiler to record each plan it compiles, in order; returns the record."""
    compiled: list[CompiledPlan] = []
    compile_plan = trainer.session.compile_plan

    def recording(graph, fetch_tensors, *args, **kwargs):
        plan = compile_plan(graph, fetch_tensors, *args, **kwargs)
        compiled.append(CompiledPlan(list(fetch_tensors), plan))
        return plan

    monkeypatch.setattr(trainer.session, "compile_plan", recording)
    return compiled
