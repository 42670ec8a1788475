"""``Interpreter`` against LiteRT's documented behaviour (tf.lite / ai_edge_litert ``Interpreter``
and ``SignatureRunner``), and how ``Model.run`` takes values that are not arrays of the input's dtype."""

from __future__ import annotations

import re

import numpy as np
import pytest

from edge_runtime import Interpreter, Model, load
from edge_runtime.format import Quantization, parse
from exporter import flow_writer, ir
from schemas import dtypes
from tests.edge_runtime.flow_models import mlp, mlp_reference

MODEL = mlp()
DATA = flow_writer.to_bytes(MODEL)
X = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)


def _ready(x: np.ndarray = X, **kwargs) -> tuple[Interpreter, int, int]:
    it = Interpreter(model_content=DATA, **kwargs)
    index = it.get_input_details()[0]["index"]
    it.resize_tensor_input(index, x.shape)
    it.allocate_tensors()
    return it, index, it.get_output_details()[0]["index"]


def test_details_have_litert_keys_and_value_types() -> None:
    it = Interpreter(model_content=DATA)
    (detail,) = it.get_input_details()
    assert set(detail) == {"name", "index", "shape", "shape_signature", "dtype", "quantization",
                           "quantization_parameters", "sparsity_parameters"}
    assert detail["name"] == "x" and type(detail["index"]) is int
    assert detail["shape"].dtype == np.int32 and detail["shape"].tolist() == [1, 4]
    assert detail["shape_signature"].dtype == np.int32 and detail["shape_signature"].tolist() == [-1, 4]
    assert detail["dtype"] is np.float32 and detail["quantization"] == (0.0, 0)
    params = detail["quantization_parameters"]
    assert set(params) == {"scales", "zero_points", "quantized_dimension"}
    assert params["scales"].dtype == np.float32 and params["scales"].size == 0
    assert params["zero_points"].dtype == np.int32 and params["zero_points"].size == 0
    assert params["quantized_dimension"] == 0 and detail["sparsity_parameters"] == {}


def test_quantization_of_a_tensor_is_reported() -> None:
    """The file's quantization was read and then ignored: every tensor said (0.0, 0)."""
    definition = parse(DATA)
    main = definition.subgraphs[0]
    x, y = main.inputs[0], main.outputs[0]
    main.tensors[x].quantization = Quantization(np.array([0.5], np.float32), np.array([3]), 0)
    main.tensors[y].quantization = Quantization(np.array([0.25, 0.5, 1.0], np.float32), np.array([0, 1, 2]), 1)
    it = Interpreter(model=Model(definition))
    (detail,) = it.get_input_details()
    assert detail["quantization"] == (0.5, 3)
    assert detail["quantization_parameters"]["scales"].tolist() == [0.5]
    assert detail["quantization_parameters"]["zero_points"].dtype == np.int32
    (out,) = it.get_output_details()
    assert out["quantization"] == (0.0, 0)  # per-axis: LiteRT's legacy pair is empty
    assert out["quantization_parameters"]["zero_points"].tolist() == [0, 1, 2]
    assert out["quantization_parameters"]["quantized_dimension"] == 1


def test_tensor_returns_a_writable_view_of_the_input_buffer() -> None:
    """LiteRT's documented zero-copy loop: ``input().fill(...)`` or ``input()[...] = x``, then
    ``invoke()``. tensor() returned a copy (writes were lost) and failed before any set_tensor."""
    it, index, out = _ready()
    input_view, output_view = it.tensor(index), it.tensor(out)
    assert np.all(input_view() == 0) and input_view().shape == X.shape
    for scale in (1.0, -2.0):
        input_view()[...] = X * scale
        it.invoke()
        np.testing.assert_allclose(output_view(), mlp_reference(MODEL, X * scale), rtol=1e-5)
    input_view().fill(3.0)
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(out), mlp_reference(MODEL, np.full_like(X, 3.0)), rtol=1e-5)


def test_litert_constructor_arguments_are_accepted() -> None:
    it = Interpreter(None, DATA, None, 1, experimental_op_resolver_type=None,
                     experimental_disable_delegate_clustering=True, experimental_default_delegate_latest_features=True)
    assert it.get_signature_list() == {"serving_default": {"inputs": ["x"], "outputs": ["y"]}}
    with pytest.raises(ValueError, match="experimental_delegates"):
        Interpreter(model_content=DATA, experimental_delegates=[object()])
    with pytest.raises(ValueError, match="exactly one of model_path or model_content"):
        Interpreter()


def test_preserve_all_tensors_keeps_intermediates_readable(tmp_path) -> None:
    path = tmp_path / "mlp.flow"
    path.write_bytes(DATA)
    it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
    index = {d["name"]: d["index"] for d in it.get_tensor_details()}
    it.resize_tensor_input(index["x"], X.shape)
    it.allocate_tensors()
    it.set_tensor(index["x"], X)
    it.invoke()
    c = MODEL.graph.constants()
    np.testing.assert_allclose(it.get_tensor(index["a"]), np.maximum(X @ c["w1"] + c["b1"], 0), rtol=1e-5)
    np.testing.assert_allclose(it.get_tensor(index["y"]), mlp_reference(MODEL, X), rtol=1e-5)
    np.testing.assert_array_equal(it.get_tensor(index["w1"]), c["w1"])

    plain, x, _ = _ready()
    plain.set_tensor(x, X)
    plain.invoke()
    with pytest.raises(ValueError, match="experimental_preserve_all_tensors"):
        plain.get_tensor(index["a"])


def test_resize_and_allocate_drop_an_input_of_the_old_shape() -> None:
    """An input set at batch 5 was run again after a resize to batch 3, giving 5 rows."""
    it, index, out = _ready()
    it.set_tensor(index, X)
    it.invoke()
    it.resize_tensor_input(index, [3, 4])
    it.allocate_tensors()
    assert it.get_input_details()[0]["shape"].tolist() == [3, 4]
    with pytest.raises(ValueError, match=r"invoke\(\) has not run"):
        it.get_tensor(out)  # the 5-row output went with its input
    with pytest.raises(ValueError, match=r"\['x'\] were not set"):
        it.invoke()
    it.set_tensor(index, X[:3])
    it.invoke()
    assert it.get_tensor(out).shape == (3, 3) and it.get_output_details()[0]["shape"].tolist() == [3, 3]


def test_resize_rules() -> None:
    it = Interpreter(model_content=DATA)
    index = it.get_input_details()[0]["index"]
    with pytest.raises(ValueError, match=r"dimensions must be >= 0"):
        it.resize_tensor_input(index, [-1, 4])
    with pytest.raises(ValueError, match="dimension 1 is fixed at 4; strict resize refused 5"):
        it.resize_tensor_input(index, [2, 5], strict=True)
    with pytest.raises(ValueError, match="dimension 1 is fixed at 4; the model cannot take 5"):
        it.resize_tensor_input(index, [2, 5])  # refused here, not at invoke
    with pytest.raises(ValueError, match="cannot resize rank 2"):
        it.resize_tensor_input(index, [2, 4, 1])
    it.resize_tensor_input(index, np.array([2, 4], np.int32), strict=True)
    with pytest.raises(RuntimeError, match=r"allocate_tensors\(\) before invoke"):
        it.invoke()  # a resize needs allocate_tensors again, as in LiteRT


def test_set_tensor_checks_dtype_and_shape_and_copies() -> None:
    it, index, out = _ready()
    with pytest.raises(ValueError, match=r"input 'x': got dtype float64 but expected float32"):
        it.set_tensor(index, X.astype(np.float64))
    with pytest.raises(ValueError, match=r"input 'x': got shape \[2, 4\] but expected \[5, 4\]"):
        it.set_tensor(index, X[:2])
    with pytest.raises(ValueError, match=r"is not an input"):
        it.set_tensor(out, X)
    value = np.asfortranarray(X.astype(">f4"))  # big-endian, column-major: same values
    it.set_tensor(index, value)
    value[...] = 0  # set_tensor copied
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(out), mlp_reference(MODEL, X), rtol=1e-5)


def test_calls_out_of_order() -> None:
    it = Interpreter(model_content=DATA)
    index, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    with pytest.raises(RuntimeError, match=r"allocate_tensors\(\) before invoke"):
        it.invoke()
    with pytest.raises(ValueError, match="call allocate_tensors"):
        it.get_tensor(index)
    it.allocate_tensors()
    np.testing.assert_array_equal(it.get_tensor(index), np.zeros((1, 4), np.float32))  # LiteRT: the buffer
    with pytest.raises(ValueError, match=r"invoke\(\) has not run"):
        it.get_tensor(out)


def test_set_tensor_of_another_batch_needs_a_resize_first() -> None:
    """As LiteRT: a batch of 2 on an input allocated at batch 1 is refused, naming the fix."""
    it = Interpreter(model_content=DATA)
    it.allocate_tensors()
    index = it.get_input_details()[0]["index"]
    with pytest.raises(ValueError, match=re.escape(
            f"input 'x': got shape [2, 4] but expected [1, 4]; call resize_tensor_input({index}, [2, 4]) and "
            "allocate_tensors() first to run this shape")):
        it.set_tensor(index, X[:2])
    it.resize_tensor_input(index, [2, 4])
    it.allocate_tensors()
    it.set_tensor(index, X[:2])
    assert it.get_input_details()[0]["shape"].tolist() == [2, 4]
    it.invoke()
    assert it.get_output_details()[0]["shape"].tolist() == [2, 3]


def test_signature_runner_keyword_inputs() -> None:
    runner = Interpreter(model_content=DATA).get_signature_runner("serving_default")
    np.testing.assert_allclose(runner(x=X)["y"], mlp_reference(MODEL, X), rtol=1e-5)
    with pytest.raises(ValueError, match="missing input 'x'"):
        runner()
    with pytest.raises(ValueError, match=r"unknown input\(s\) \['z'\]"):
        runner(x=X, z=X)
    details = runner.get_input_details()
    assert list(details) == ["x"] and details["x"]["shape_signature"].tolist() == [-1, 4]
    assert list(runner.get_output_details()) == ["y"]


def _typed_model() -> bytes:
    """y = float(n) * x and z = float(u): an int64 scalar, a uint8 vector and a float input."""
    g = ir.Graph()
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (2,))
    g.values["n"] = ir.Value("n", dtypes.INT64, ())
    g.values["u"] = ir.Value("u", dtypes.UINT8, (2,))
    g.inputs, g.outputs = ["x", "n", "u"], ["y", "z"]
    g.nodes = [
        ir.Node("Cast", ["n"], ["nf"], {"to": dtypes.FLOAT}),
        ir.Node("Mul", ["x", "nf"], ["y"]),
        ir.Node("Cast", ["u"], ["z"], {"to": dtypes.FLOAT}),
    ]
    return flow_writer.to_bytes(ir.Model(g))


@pytest.mark.parametrize(
    "feeds, message",
    [
        # 2.7 ran as 2, and [2.5, 1.0] as [2, 1]: a float is not silently truncated to an integer input
        ({"n": 2.7}, r"input 'n': cannot convert to int64: float64 values would change"),
        ({"n": np.float64(2.0)}, r"input 'n': cannot convert to int64"),
        ({"u": [2.5, 1.0]}, r"input 'u': cannot convert to uint8"),
        # an OverflowError escaped
        ({"u": [300, 1]}, r"input 'u': cannot convert to uint8: Python integer 300 out of bounds"),
        ({"n": "3"}, r"input 'n': cannot convert to int64: <U1 values would change"),
        ({"x": np.ones(2, ">f8")}, r"input 'x': expected dtype float32, got >f8"),
    ],
)
def test_values_that_would_change_are_refused(feeds, message) -> None:
    model = load(_typed_model())
    good = {"x": np.ones(2, np.float32), "n": 2, "u": np.ones(2, np.uint8)}
    with pytest.raises(ValueError, match=message):
        model.run({**good, **feeds})


def test_scalars_lists_and_other_layouts_are_taken() -> None:
    model = load(_typed_model())
    want = model.run({"x": np.array([1.5, -2.0], np.float32), "n": np.array(3), "u": np.array([7, 9], np.uint8)})
    for feeds in (
        {"x": [1.5, -2.0], "n": 3, "u": [7, 9]},  # Python values take the declared dtype
        {"x": np.array([1.5, -2.0], ">f4"), "n": np.array(3, ">i8"), "u": (7, 9)},  # big-endian
        {"x": np.array([1.5, 0, -2.0], np.float32)[::2], "n": np.int64(3), "u": np.array([7, 9], np.uint8)},
        {"x": np.float32([1.5, -2.0]), "n": True + 2, "u": np.array([[7], [9]], np.uint8)[:, 0]},
    ):
        got = model.run(feeds)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
