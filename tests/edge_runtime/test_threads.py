"""``Interpreter(num_threads=...)``: the BLAS thread count during invoke and signature calls, as LiteRT's."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from edge_runtime import Interpreter
from edge_runtime import threads as threads_module
from exporter import flow_writer
from tests.edge_runtime.flow_models import mlp

DATA = flow_writer.to_bytes(mlp())


def blas_threads() -> int:
    """NumPy's BLAS thread count: the library the runtime's kernels call. Not the first BLAS listed:
    transformers (imported by the benchmark zoo's tests) loads SciPy, whose own OpenBLAS then comes
    first, and the runtime, having found its libraries before that, leaves it alone."""
    infos = [info for info in threadpool_info() if info["user_api"] == "blas"]
    return next((info["num_threads"] for info in infos if "numpy" in info["filepath"]), infos[0]["num_threads"])


def spied(num_threads) -> tuple[Interpreter, list[int]]:
    """An allocated Interpreter whose model records the BLAS thread count in force at each run."""
    it = Interpreter(model_content=DATA, num_threads=num_threads)
    it.allocate_tensors()
    seen: list[int] = []
    run = it.model.run

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return run(*args, **kwargs)

    it.model.run = spy
    return it, seen


@pytest.mark.parametrize("num_threads, expected", [(1, 1), (0, 1), (3, 3)])
def test_num_threads_holds_during_invoke_and_signature_calls(num_threads, expected) -> None:
    before = blas_threads()
    it, seen = spied(num_threads)
    index = it.get_input_details()[0]["index"]
    it.resize_tensor_input(index, [2, 4])
    it.allocate_tensors()
    it.set_tensor(index, np.ones((2, 4), np.float32))
    it.invoke()
    out = it.get_signature_runner()(x=np.ones((2, 4), np.float32))
    assert seen == [expected, expected] and blas_threads() == before
    np.testing.assert_allclose(next(iter(out.values())), it.get_tensor(it.get_output_details()[0]["index"]))


def test_default_leaves_the_thread_count_alone() -> None:
    before = blas_threads()
    for default in (None, -1):
        it, seen = spied(default)
        it.set_tensor(it.get_input_details()[0]["index"], np.ones((1, 4), np.float32))
        it.invoke()
        assert seen == [before]


@pytest.mark.parametrize("bad", [-2, 1.5, True, "4"])
def test_bad_num_threads_is_refused(bad) -> None:
    with pytest.raises(ValueError, match="num_threads must be an integer >= -1"):
        Interpreter(model_content=DATA, num_threads=bad)


def test_without_threadpoolctl_a_warning_says_num_threads_has_no_effect(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # import fails
    threads_module._blas_controllers.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="num_threads=2 has no effect.*threadpoolctl"):
            it = Interpreter(model_content=DATA, num_threads=2)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.ones((1, 4), np.float32))
        it.invoke()  # still runs, at the default thread count
    finally:
        threads_module._blas_controllers.cache_clear()


@pytest.mark.parametrize("count, words", [(1, "1 thread,"), (2, "2 threads,")])
def test_blas_description_names_library_count_and_kernels(count, words) -> None:
    info = next(i for i in threadpool_info() if i["user_api"] == "blas")
    with threads_module.BlasThreads(count).applied():
        text = threads_module.describe_blas()
    assert text.startswith(info["internal_api"]) and words in text and f"{info.get('architecture')} kernels" in text


def test_blas_description_without_threadpoolctl(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)
    threads_module._blas_controllers.cache_clear()
    try:
        assert threads_module.describe_blas() == "unknown (threadpoolctl not installed)"
    finally:
        threads_module._blas_controllers.cache_clear()


def test_pinned_openblas_kernels_are_named_for_benchmark_reports(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    note = threads_module.forced_blas_kernels()
    assert note is not None and "OPENBLAS_CORETYPE=Haswell" in note and "env -u OPENBLAS_CORETYPE" in note
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert threads_module.forced_blas_kernels() is None
