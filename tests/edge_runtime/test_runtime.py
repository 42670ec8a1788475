"""The runtime: dict API, LiteRT Interpreter API, input checking, threads, plan lifetimes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from edge_runtime import Interpreter, load
from exporter import flow_writer
from tests.edge_runtime.flow_models import mlp, mlp_reference

MODEL = mlp()
DATA = flow_writer.to_bytes(MODEL)


@pytest.fixture(scope="module")
def model():
    return load(DATA)


@pytest.mark.parametrize("batch", [1, 3, 64])
def test_dynamic_batch(model, batch: int) -> None:
    x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
    np.testing.assert_allclose(model.run({"x": x})["y"], mlp_reference(MODEL, x), rtol=1e-5)


def test_concurrent_runs_on_one_model(model) -> None:
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((int(n), 4)).astype(np.float32) for n in rng.integers(1, 50, 64)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda x: model.run({"x": x})["y"], inputs))
    for x, y in zip(inputs, results):
        np.testing.assert_allclose(y, mlp_reference(MODEL, x), rtol=1e-5)


@pytest.mark.parametrize(
    "feeds, message",
    [
        ({"x": np.ones((2, 4), np.float64)}, "input 'x': expected dtype float32, got float64"),
        ({"x": np.ones((2, 5), np.float32)}, r"input 'x': dimension 1 must be 4, got 5"),
        ({"x": np.ones((4,), np.float32)}, r"input 'x': expected rank 2 .* got rank 1"),
        ({}, "missing input 'x'"),
        ({"x": np.ones((1, 4), np.float32), "z": np.ones(1)}, r"unknown input\(s\) \['z'\]"),
    ],
)
def test_bad_inputs_name_the_input(model, feeds, message) -> None:
    with pytest.raises(ValueError, match=message):
        model.run(feeds)


def test_python_lists_take_the_declared_dtype(model) -> None:
    out = model.run({"x": [[0.5, 1, 2, 3]]})["y"]
    np.testing.assert_allclose(out, mlp_reference(MODEL, np.array([[0.5, 1, 2, 3]], np.float32)), rtol=1e-5)


def test_intermediates_are_released_after_their_last_use(model) -> None:
    plan = model.plan
    released = {slot for step in plan.steps for slot in step.release}
    tensors = model.definition.subgraphs[0].tensors
    intermediates = {i for i, t in enumerate(tensors) if t.data is None} - set(plan.inputs) - set(plan.outputs)
    assert intermediates <= released, "every intermediate must be freed once dead"
    assert not released & set(plan.outputs)


def test_interpreter_follows_the_litert_api() -> None:
    it = Interpreter(model_content=DATA)
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    assert set(inp) >= {"name", "index", "shape", "shape_signature", "dtype", "quantization", "quantization_parameters"}
    assert inp["dtype"] is np.float32 and inp["shape_signature"].tolist() == [-1, 4]
    it.resize_tensor_input(inp["index"], [5, 4])
    it.allocate_tensors()
    x = np.random.default_rng(7).standard_normal((5, 4)).astype(np.float32)
    it.set_tensor(inp["index"], x)
    it.invoke()
    y = it.get_tensor(out["index"])
    np.testing.assert_allclose(y, mlp_reference(MODEL, x), rtol=1e-5)
    assert it.get_output_details()[0]["shape"].tolist() == [5, 3]
    assert it.get_signature_list() == {"serving_default": {"inputs": ["x"], "outputs": ["y"]}}
    runner = it.get_signature_runner("serving_default")
    np.testing.assert_allclose(runner(x=x)["y"], y)


def test_interpreter_rejects_wrong_shape_and_unset_inputs() -> None:
    it = Interpreter(model_content=DATA)
    it.allocate_tensors()
    index = it.get_input_details()[0]["index"]
    with pytest.raises(ValueError, match=r"input 'x': got shape \[2, 3\]"):
        it.set_tensor(index, np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"were not set"):
        it.invoke()
    with pytest.raises(ValueError, match="is not an input"):
        it.set_tensor(999, np.ones((1, 4), np.float32))


def test_gpu_device_without_cuda_fails_clearly() -> None:
    try:
        import cupy  # noqa: F401

        pytest.skip("CuPy is installed here; the no-GPU message cannot be checked")
    except ImportError:
        pass
    with pytest.raises(RuntimeError, match="device 'gpu' needs CuPy"):
        load(DATA, device="gpu")


def test_inf_and_nan_results_do_not_warn() -> None:
    """log(0) = -inf is an answer, not a failure: the runtime keeps NumPy quiet (warnings are errors here)."""
    from exporter import ir
    from schemas import dtypes

    g = ir.Graph()
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (3,))
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes = [ir.Node("Log", ["x"], ["l"]), ir.Node("Div", ["l", "x"], ["y"])]
    y = load(flow_writer.to_bytes(ir.Model(g))).run({"x": np.array([0.0, 1.0, -1.0], np.float32)})["y"]
    assert y[0] == -np.inf and y[1] == 0.0 and np.isnan(y[2])


def _two_signature_model():
    """The MLP exposing its hidden layer too: serving_default gives y, "features" gives the hidden layer."""
    from exporter import ir

    model = mlp()
    model.graph.outputs = ["y", "a"]
    model.signatures = {
        "serving_default": ir.Signature({"x": "x"}, {"y": "y"}),
        "features": ir.Signature({"pixels": "x"}, {"embedding": "a"}),
    }
    return model


def test_each_signature_runs_with_its_own_names() -> None:
    model = _two_signature_model()
    loaded = load(flow_writer.to_bytes(model))
    x = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)
    c = model.graph.constants()
    assert set(loaded.run({"x": x})) == {"y"}
    np.testing.assert_allclose(loaded.run({"x": x})["y"], mlp_reference(model, x), rtol=1e-5)
    features = loaded.run({"pixels": x}, signature="features")
    np.testing.assert_allclose(features["embedding"], np.maximum(x @ c["w1"] + c["b1"], 0), rtol=1e-5)
    with pytest.raises(ValueError, match=r"unknown input\(s\) \['x'\]; the model takes \['pixels'\]"):
        loaded.run({"x": x}, signature="features")
    with pytest.raises(ValueError, match=r"no signature 'nope'; the model has \['features', 'serving_default'\]"):
        loaded.run({"x": x}, signature="nope")

    it = Interpreter(model_content=flow_writer.to_bytes(model))
    assert it.get_signature_list() == {
        "serving_default": {"inputs": ["x"], "outputs": ["y"]},
        "features": {"inputs": ["pixels"], "outputs": ["embedding"]},
    }
    runner = it.get_signature_runner("features")
    assert list(runner.get_input_details()) == ["pixels"]
    assert list(runner.get_output_details()) == ["embedding"]
    np.testing.assert_allclose(runner(pixels=x)["embedding"], features["embedding"])
    assert list(it.get_signature_runner()(x=x)) == ["y"]  # no key: serving_default, as LiteRT
    with pytest.raises(ValueError, match="no signature 'nope'"):
        it.get_signature_runner("nope")


def test_a_signature_that_leaves_an_input_unfed_is_a_format_error() -> None:
    from edge_runtime import ModelFormatError
    from exporter import ir
    from schemas import dtypes

    model = _two_signature_model()
    model.graph.values["z"] = ir.Value("z", dtypes.FLOAT, (-1, 4))
    model.graph.inputs = ["x", "z"]
    model.graph.nodes.append(ir.Node("Add", ["x", "z"], ["s"], name="uses_z"))
    model.graph.outputs.append("s")
    model.signatures["serving_default"].inputs["z"] = "z"
    with pytest.raises(ModelFormatError, match=r"signature 'features' leaves main-graph inputs \['z'\] without a feed"):
        load(flow_writer.to_bytes(model))

