"""Graph passes: each on small hand-built IR graphs, then every pass preserving outputs on real models."""

from __future__ import annotations

import numpy as np
import pytest

import edge_runtime.kernels.fused  # noqa: F401  (registers the fused kernels until the families list them)
import schemas.ops.fused  # noqa: F401
from edge_runtime import load
from exporter import flow_writer, ir
from exporter.passes import (
    DEFAULT_PASSES,
    cancel_transposes,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_batch_norm,
    fold_constants,
    fuse_activations,
    fuse_max_pools,
    fuse_pointwise,
    fuse_pointwise_strided,
    merge_sibling_matmuls,
    optimize,
    remove_identities,
    transpose_gemm_weights,
)
from exporter.passes.graph_edit import op_counts
from schemas import dtypes

RNG = np.random.default_rng(0)


def randn(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def graph(nodes, inputs, outputs, constants=None, shapes=None, name="main") -> ir.Graph:
    g = ir.Graph(name=name, nodes=nodes, inputs=list(inputs), outputs=list(outputs))
    for n in inputs:
        g.values[n] = ir.Value(n, dtypes.FLOAT, (shapes or {}).get(n))
    for n, data in (constants or {}).items():
        g.values[n] = ir.Value(n, data=np.asarray(data))
    for n, shape in (shapes or {}).items():
        if n not in g.values:
            g.values[n] = ir.Value(n, dtypes.FLOAT, shape)
    return g


def model(g: ir.Graph) -> ir.Model:
    return ir.Model(g, opset_imports={"": 21})


def run(m: ir.Model, **feeds) -> dict[str, np.ndarray]:
    return load(flow_writer.to_bytes(m)).run(feeds)


def ops(m: ir.Model) -> list[str]:
    return [n.op_type for n in m.graph.nodes]


def assert_same_outputs(before: ir.Model, after: ir.Model, rtol=1e-5, atol=1e-6, **feeds) -> None:
    want, got = run(before, **feeds), run(after, **feeds)
    assert set(want) == set(got)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)


def if_model() -> ir.Model:
    """y = If(c, then: x * w (w captured from outside), else: Identity(x) + 1)."""
    then_g = graph([ir.Node("Mul", ["x", "w"], ["t"], name="then_mul")], [], ["t"], name="then")
    else_g = graph(
        [ir.Node("Identity", ["x"], ["ex"], name="else_id"), ir.Node("Add", ["ex", "one"], ["e"], name="else_add")],
        [], ["e"], constants={"one": np.float32(1)}, name="else",
    )
    g = graph(
        [
            ir.Node("Identity", ["w0"], ["w"], name="read_w"),
            ir.Node("If", ["c"], ["y"], {"then_branch": then_g, "else_branch": else_g}, name="branch"),
        ],
        ["x", "c"], ["y"], constants={"w0": randn(3)}, shapes={"x": (3,)},
    )
    g.values["c"] = ir.Value("c", dtypes.BOOL, ())
    return model(g)


class TestRemoveIdentities:
    def test_identity_dropout_cast_and_reshape_go(self) -> None:
        g = graph(
            [
                ir.Node("Identity", ["x"], ["a"], name="id"),
                ir.Node("Relu", ["a"], ["b"], name="relu"),
                ir.Node("Dropout", ["b"], ["c", "mask"], {"seed": 1}, name="drop"),
                ir.Node("Cast", ["c"], ["d"], {"to": dtypes.FLOAT}, name="cast"),
                ir.Node("Reshape", ["d", "same"], ["e"], name="reshape"),
                ir.Node("Neg", ["e"], ["y"], name="neg"),
            ],
            ["x"], ["y"], constants={"same": np.array([2, -1], np.int64)},
            shapes={"x": (2, 3), "a": (2, 3), "b": (2, 3), "c": (2, 3), "d": (2, 3)},
        )
        g.values["c"].dtype = g.values["d"].dtype = dtypes.FLOAT
        before = model(g)
        after, removed = remove_identities(before)
        assert removed == 4 and ops(after) == ["Relu", "Neg"]
        assert ops(before) == ["Identity", "Relu", "Dropout", "Cast", "Reshape", "Neg"], "input model was edited"
        assert_same_outputs(before, after, x=randn(2, 3))

    def test_keeps_what_changes_values(self) -> None:
        g = graph(
            [
                ir.Node("Cast", ["x"], ["a"], {"to": dtypes.DOUBLE}, name="cast"),
                ir.Node("Reshape", ["x", "other"], ["b"], name="reshape"),
                ir.Node("Dropout", ["x", "ratio", "train"], ["c"], name="drop"),
            ],
            ["x"], ["a", "b", "c"],
            constants={"other": np.array([3, 2], np.int64), "ratio": np.float32(0.5), "train": np.bool_(True)},
            shapes={"x": (2, 3)},
        )
        assert remove_identities(model(g))[1] == 0

    def test_dropout_with_read_mask_stays(self) -> None:
        g = graph([ir.Node("Dropout", ["x"], ["y", "mask"], name="drop")], ["x"], ["y", "mask"])
        assert remove_identities(model(g))[1] == 0

    def test_identity_onto_graph_output_renames_producer(self) -> None:
        g = graph([ir.Node("Relu", ["x"], ["h"], name="relu"), ir.Node("Identity", ["h"], ["y"], name="id")], ["x"], ["y"])
        after, removed = remove_identities(model(g))
        assert removed == 1 and after.graph.nodes[0].outputs == ["y"]

    def test_identity_of_graph_input_to_output_stays(self) -> None:
        g = graph([ir.Node("Identity", ["x"], ["y"], name="id")], ["x"], ["y"])
        assert remove_identities(model(g))[1] == 0

    def test_inside_subgraph_and_captures(self) -> None:
        before = if_model()
        after, removed = remove_identities(before)
        assert removed == 2  # read_w outside, else_id inside the else branch
        branch = after.graph.nodes[0]
        assert branch.attrs["then_branch"].nodes[0].inputs == ["x", "w0"]  # the capture now reads w0
        assert branch.attrs["else_branch"].nodes[0].inputs == ["x", "one"]
        for c in (True, False):
            assert_same_outputs(before, after, x=randn(3), c=np.array(c))


class TestFoldConstants:
    def test_all_constant_chain_folds(self) -> None:
        g = graph(
            [
                ir.Node("Add", ["a", "b"], ["ab"], name="add"),
                ir.Node("Mul", ["ab", "b"], ["k"], name="mul"),
                ir.Node("Mul", ["x", "k"], ["y"], name="scale"),
            ],
            ["x"], ["y"], constants={"a": randn(4), "b": randn(4)},
        )
        before = model(g)
        after, folded = fold_constants(before)
        assert folded == 2 and ops(after) == ["Mul"]
        c = before.graph.constants()
        np.testing.assert_allclose(after.graph.values["k"].data, (c["a"] + c["b"]) * c["b"], rtol=1e-6)
        assert_same_outputs(before, after, x=randn(4))

    def test_skips_huge_outputs(self) -> None:
        g = graph([ir.Node("ConstantOfShape", ["shape"], ["big"], name="zeros"), ir.Node("Add", ["x", "big"], ["y"], name="add")],
                  ["x"], ["y"], constants={"shape": np.array([1024, 1024], np.int64)})
        assert fold_constants(model(g))[1] == 0

    def test_folds_inside_subgraph_with_outer_constants(self) -> None:
        then_g = graph([ir.Node("Neg", ["w"], ["nw"], name="neg"), ir.Node("Mul", ["x", "nw"], ["t"], name="mul")],
                       [], ["t"], name="then")
        else_g = graph([ir.Node("Identity", ["x"], ["e"], name="id")], [], ["e"], name="else")
        g = graph([ir.Node("If", ["c"], ["y"], {"then_branch": then_g, "else_branch": else_g}, name="branch")],
                  ["x", "c"], ["y"], constants={"w": randn(3)})
        g.values["c"] = ir.Value("c", dtypes.BOOL, ())
        before = model(g)
        after, folded = fold_constants(before)
        then_after = after.graph.nodes[0].attrs["then_branch"]
        assert folded == 1 and [n.op_type for n in then_after.nodes] == ["Mul"]
        assert_same_outputs(before, after, x=randn(3), c=np.array(True))


class TestEliminateDeadCode:
    def test_removes_unused_nodes_constants_and_outputs(self) -> None:
        g = graph(
            [
                ir.Node("Relu", ["x"], ["unused"], name="dead"),
                ir.Node("Mul", ["x", "w_dead"], ["also_unused"], name="dead2"),
                ir.Node("Dropout", ["x"], ["y", "mask"], name="drop"),
            ],
            ["x"], ["y"], constants={"w_dead": randn(3)},
        )
        after, removed = eliminate_dead_code(model(g))
        assert ops(after) == ["Dropout"] and after.graph.nodes[0].outputs == ["y"]
        assert "w_dead" not in after.graph.values and removed == 4

    def test_keeps_values_captured_by_subgraphs(self) -> None:
        before = if_model()
        after, _ = eliminate_dead_code(before)
        assert ops(after) == ["Identity", "If"]  # read_w feeds only the then branch, by capture
        assert_same_outputs(before, after, x=randn(3), c=np.array(True))


class TestCommonSubexpressions:
    def test_duplicates_merge_including_duplicate_constants(self) -> None:
        w = randn(3)
        g = graph(
            [
                ir.Node("Mul", ["x", "w1"], ["a"], name="m1"),
                ir.Node("Mul", ["x", "w2"], ["b"], name="m2"),
                ir.Node("Add", ["a", "b"], ["y"], name="add"),
            ],
            ["x"], ["y"], constants={"w1": w, "w2": w.copy()},
        )
        before = model(g)
        after, merged = eliminate_common_subexpressions(before)
        assert merged == 2 and ops(after) == ["Mul", "Add"] and after.graph.nodes[1].inputs == ["a", "a"]
        assert_same_outputs(before, after, x=randn(3))

    def test_different_attrs_or_graph_outputs_are_kept(self) -> None:
        g = graph(
            [
                ir.Node("LeakyRelu", ["x"], ["a"], {"alpha": 0.1}, name="l1"),
                ir.Node("LeakyRelu", ["x"], ["b"], {"alpha": 0.2}, name="l2"),
                ir.Node("LeakyRelu", ["x"], ["c"], {"alpha": 0.1}, name="l3"),
            ],
            ["x"], ["a", "b", "c"],
        )
        assert eliminate_common_subexpressions(model(g))[1] == 0


def conv_bn(producer: str = "Conv", activation: str | None = "Relu") -> ir.Model:
    c = 4
    nodes = []
    constants = {"scale": RNG.uniform(0.5, 1.5, c).astype(np.float32), "bias": randn(c),
                 "mean": randn(c), "var": RNG.uniform(0.5, 1.5, c).astype(np.float32)}
    shapes = {}
    if producer == "Conv":
        constants.update(w=randn(c, 3, 3, 3), b=randn(c))
        nodes.append(ir.Node("Conv", ["x", "w", "b"], ["h"], {"pads": [1, 1, 1, 1]}, name="conv"))
        shapes["x"] = (2, 3, 5, 5)
    elif producer == "Gemm":
        constants.update(w=randn(c, 6), b=randn(c))
        nodes.append(ir.Node("Gemm", ["x", "w", "b"], ["h"], {"transB": 1, "alpha": 0.5, "beta": 2.0}, name="fc"))
        shapes["x"] = (2, 6)
    else:  # MatMul + Add
        constants.update(w=randn(6, c), b=randn(c))
        nodes += [ir.Node("MatMul", ["x", "w"], ["mm"], name="mm"), ir.Node("Add", ["mm", "b"], ["h"], name="bias")]
        shapes.update(x=(2, 6), mm=(2, c), h=(2, c))
    nodes.append(ir.Node("BatchNormalization", ["h", "scale", "bias", "mean", "var"], ["n"], {"epsilon": 1e-3}, name="bn"))
    if activation == "Clip":
        constants.update(lo=np.float32(0), hi=np.float32(6))
        nodes.append(ir.Node("Clip", ["n", "lo", "hi"], ["y"], name="act"))
    elif activation:
        nodes.append(ir.Node(activation, ["n"], ["y"], name="act"))
    return model(graph(nodes, ["x"], ["y" if activation else "n"], constants=constants, shapes=shapes))


class TestFoldBatchNorm:
    @pytest.mark.parametrize("producer", ["Conv", "Gemm", "MatMulAdd"])
    def test_folds_into_producer(self, producer) -> None:
        before = conv_bn(producer, activation=None)
        after, folded = fold_batch_norm(before)
        assert folded == 1 and "BatchNormalization" not in ops(after)
        x = randn(*before.graph.values["x"].shape)
        # the two layouts sum K products in different orders: float32 rounding of outputs up to
        # ~30 reaches 2e-5 (a transposed or misplaced weight would be off by whole units)
        assert_same_outputs(before, after, rtol=1e-4, atol=1e-4, x=x)

    def test_matmul_without_bias_gains_an_add(self) -> None:
        before = conv_bn("MatMulAdd", activation=None)
        before.graph.nodes = [before.graph.nodes[0], before.graph.nodes[2]]
        before.graph.nodes[1].inputs[0] = "mm"
        after, folded = fold_batch_norm(before)
        assert folded == 1 and ops(after) == ["MatMul", "Add"]
        assert_same_outputs(before, after, rtol=1e-4, atol=1e-5, x=randn(2, 6))

    def test_shared_producer_output_is_not_folded(self) -> None:
        before = conv_bn("Conv", activation=None)
        before.graph.outputs.append("h")
        assert fold_batch_norm(before)[1] == 0

    def test_non_constant_statistics_are_not_folded(self) -> None:
        before = conv_bn("Conv", activation=None)
        before.graph.inputs.append("mean")
        before.graph.values["mean"] = ir.Value("mean", dtypes.FLOAT, (4,))
        assert fold_batch_norm(before)[1] == 0


class TestFuseActivations:
    @pytest.mark.parametrize("activation", ["Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"])
    @pytest.mark.parametrize("producer", ["Conv", "Gemm"])
    def test_fused_kernel_matches(self, producer, activation) -> None:
        before, _ = fold_batch_norm(conv_bn(producer, activation))
        after, fused = fuse_activations(before)
        assert fused == 1 and ops(after) == ["Fused" + producer]
        assert after.graph.nodes[0].outputs == ["y"] and after.opset_imports["flowstack"] == 1
        assert_same_outputs(before, after, x=randn(*before.graph.values["x"].shape))

    def test_not_fused_when_linear_output_is_read_elsewhere(self) -> None:
        before, _ = fold_batch_norm(conv_bn("Conv", "Relu"))
        before.graph.outputs.append("n")
        assert fuse_activations(before)[1] == 0

    def test_clip_with_variable_bound_is_not_fused(self) -> None:
        before, _ = fold_batch_norm(conv_bn("Conv", "Clip"))
        before.graph.inputs.append("hi")
        before.graph.values["hi"] = ir.Value("hi", dtypes.FLOAT, ())
        assert fuse_activations(before)[1] == 0


def conv_pool(activation: str | None = "Relu", **pool_attrs) -> ir.Model:
    """Conv (+ BatchNormalization + activation) -> MaxPool, as conv_bn builds it, then pooled."""
    m = conv_bn("Conv", activation)
    last = m.graph.outputs[0]
    attrs = pool_attrs or {"kernel_shape": [2, 2], "strides": [2, 2]}
    m.graph.nodes.append(ir.Node("MaxPool", [last], ["pooled"], attrs, name="pool"))
    m.graph.outputs = ["pooled"]
    return m


class TestFuseMaxPools:
    @pytest.mark.parametrize("activation", [None, "Relu", "Clip", "Sigmoid", "Tanh"])
    @pytest.mark.parametrize("pool", [{"kernel_shape": [2, 2], "strides": [2, 2]},
                                      {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                                      {"kernel_shape": [2, 3]}])
    def test_fused_kernel_matches(self, activation, pool) -> None:
        before, _ = fuse_activations(fold_batch_norm(conv_pool(activation, **pool))[0])
        after, fused = fuse_max_pools(before)
        assert fused == 1 and ops(after) == ["FusedConvMaxPool"] and after.graph.nodes[0].outputs == ["pooled"]
        assert after.graph.nodes[0].attrs["pool_kernel_shape"] == pool["kernel_shape"]
        assert after.opset_imports["flowstack"] == 1
        assert_same_outputs(before, after, x=randn(*before.graph.values["x"].shape))
        assert ops(before)[-1] == "MaxPool", "input model was edited"

    @pytest.mark.parametrize("pool", [
        {"kernel_shape": [2, 2], "pads": [2, 0, 0, 0]},  # a window of padding alone
        {"kernel_shape": [2, 2], "ceil_mode": 1},
        {"kernel_shape": [2, 2], "dilations": [2, 2]},
        {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"},
    ], ids=["pad-not-under-kernel", "ceil_mode", "dilations", "auto_pad"])
    def test_pools_it_cannot_reorder_are_left(self, pool) -> None:
        before, _ = fuse_activations(fold_batch_norm(conv_pool("Relu", **pool))[0])
        assert fuse_max_pools(before)[1] == 0

    def test_decreasing_activation_is_left(self) -> None:
        before, _ = fuse_activations(fold_batch_norm(conv_pool("LeakyRelu"))[0])
        before.graph.nodes[0].attrs["activation_params"] = [-0.5]
        assert fuse_max_pools(before)[1] == 0

    def test_indices_output_or_second_reader_is_left(self) -> None:
        before, _ = fuse_activations(fold_batch_norm(conv_pool("Relu"))[0])
        before.graph.nodes[-1].outputs.append("indices")
        assert fuse_max_pools(before)[1] == 0
        before, _ = fuse_activations(fold_batch_norm(conv_pool("Relu"))[0])
        before.graph.outputs.append("y")  # the activation's output is read besides the pool
        assert fuse_max_pools(before)[1] == 0


def depthwise_project(side: int = 16, activation: str | None = "Clip", pointwise_relu: bool = False,
                      conv_attrs: dict | None = None, pointwise_attrs: dict | None = None) -> ir.Model:
    """MobileNetV2's depthwise 3x3 (+ Clip) -> 1x1 project pair, with the shapes an import infers."""
    c, m = 8, 3
    conv_attrs = {"group": c, "pads": [1, 1, 1, 1], **(conv_attrs or {})}
    stride = (conv_attrs.get("strides") or [1, 1])[0]
    out = (side + 2 - 3) // stride + 1
    constants = {"w": randn(c, 1, 3, 3), "b": randn(c), "w2": randn(m, c, 1, 1), "b2": randn(m),
                 "lo": np.float32(0), "hi": np.float32(6)}
    shapes = {"x": (1, c, side, side), "d": (1, c, out, out), "a": (1, c, out, out), "p": (1, m, out, out),
              "y": (1, m, out, out)}
    nodes = [ir.Node("Conv", ["x", "w", "b"], ["d"], conv_attrs, name="dw")]
    if activation == "Clip":
        nodes.append(ir.Node("Clip", ["d", "lo", "hi"], ["a"], name="act"))
    elif activation:
        nodes.append(ir.Node(activation, ["d"], ["a"], name="act"))
    last = "a" if activation else "d"
    nodes.append(ir.Node("Conv", [last, "w2", "b2"], ["p"], dict(pointwise_attrs or {}), name="project"))
    if pointwise_relu:
        nodes.append(ir.Node("Relu", ["p"], ["y"], name="project_act"))
    return model(graph(nodes, ["x"], ["y" if pointwise_relu else "p"], constants=constants, shapes=shapes))


class TestFusePointwise:
    @pytest.mark.parametrize("activation", [None, "Clip", "Relu"])
    @pytest.mark.parametrize("pointwise_relu", [False, True])
    def test_fused_kernel_matches(self, activation, pointwise_relu) -> None:
        before, _ = fuse_activations(depthwise_project(activation=activation, pointwise_relu=pointwise_relu))
        after, fused = fuse_pointwise(before)
        assert fused == 1 and ops(after) == ["FusedConvPointwise"] and after.opset_imports["flowstack"] == 1
        node = after.graph.nodes[0]
        assert node.inputs == ["x", "w", "b", "w2", "b2"] and node.outputs == after.graph.outputs
        assert node.attrs["pointwise_activation"] == ("Relu" if pointwise_relu else "")
        assert_same_outputs(before, after, atol=1e-5, x=randn(1, 8, 16, 16))
        assert ops(before)[-1] in ("FusedConv", "Conv"), "input model was edited"

    def test_runs_in_the_default_pipeline(self) -> None:
        before = depthwise_project()
        after, report = optimize(before)
        assert report.changes["fuse_pointwise"] == 1 and ops(after) == ["FusedConvPointwise"]
        assert_same_outputs(before, after, atol=1e-5, x=randn(1, 8, 16, 16))

    @pytest.mark.parametrize("build", [
        lambda: depthwise_project(side=7),  # a padded row 2/7 wider than the output
        lambda: depthwise_project(conv_attrs={"strides": [2, 2]}),
        lambda: depthwise_project(pointwise_attrs={"strides": [2, 2]}),
        lambda: depthwise_project(pointwise_attrs={"pads": [1, 1, 1, 1]}),
        lambda: depthwise_project(pointwise_attrs={"auto_pad": "SAME_UPPER"}),
    ], ids=["narrow-plane", "strided-conv", "strided-pointwise", "padded-pointwise", "auto-pad-pointwise"])
    def test_pairs_that_do_not_pay_or_do_not_fit_are_left(self, build) -> None:
        before, _ = fuse_activations(build())
        assert fuse_pointwise(before)[1] == 0

    def test_second_reader_public_output_or_unknown_shape_is_left(self) -> None:
        before, _ = fuse_activations(depthwise_project())
        before.graph.outputs.append("a")
        assert fuse_pointwise(before)[1] == 0
        before, _ = fuse_activations(depthwise_project())
        before.graph.nodes.append(ir.Node("Relu", ["a"], ["other"], name="other"))
        before.graph.outputs.append("other")
        assert fuse_pointwise(before)[1] == 0
        before, _ = fuse_activations(depthwise_project())
        before.graph.values["a"] = ir.Value("a", dtypes.FLOAT, None)
        assert fuse_pointwise(before)[1] == 0

    def test_a_pointwise_producer_is_not_fused(self) -> None:
        before, _ = fuse_activations(depthwise_project())
        before.graph.values["w"] = ir.Value("w", data=randn(8, 8, 1, 1))
        before.graph.nodes[0].attrs = {}
        assert fuse_pointwise(before)[1] == 0



def expand_depthwise(side: int = 28, pointwise_activation: str | None = "Clip", activation: str | None = "Clip",
                     conv_attrs: dict | None = None, expand_attrs: dict | None = None, channels: int = 4) -> ir.Model:
    """MobileNetV2's 1x1 expand (+ Clip) -> stride-2 depthwise 3x3 (+ Clip), with the shapes an import infers."""
    c, m = channels, 12
    conv_attrs = {"group": m, "pads": [1, 1, 1, 1], "strides": [2, 2], **(conv_attrs or {})}
    out = (side + 2 - 3) // conv_attrs["strides"][0] + 1
    constants = {"w1": randn(m, c, 1, 1), "b1": randn(m), "w": randn(m, 1, 3, 3), "b": randn(m),
                 "lo": np.float32(0), "hi": np.float32(6)}
    shapes = {"x": (-1, c, side, side), "e": (-1, m, side, side), "a": (-1, m, side, side), "d": (-1, m, out, out),
              "y": (-1, m, out, out)}
    nodes = [ir.Node("Conv", ["x", "w1", "b1"], ["e"], dict(expand_attrs or {}), name="expand")]
    for source, target, act, label in (("e", "a", pointwise_activation, "expand_act"), ("d", "y", activation, "dw_act")):
        if act == "Clip":
            nodes.append(ir.Node("Clip", [source, "lo", "hi"], [target], name=label))
        elif act:
            nodes.append(ir.Node(act, [source], [target], name=label))
        if label == "expand_act":
            nodes.append(ir.Node("Conv", ["a" if act else "e", "w", "b"], ["d"], conv_attrs, name="dw"))
    return model(graph(nodes, ["x"], ["y" if activation else "d"], constants=constants, shapes=shapes))


class TestFusePointwiseStrided:
    @pytest.mark.parametrize("pointwise_activation", [None, "Clip", "Relu"])
    @pytest.mark.parametrize("activation", [None, "Clip"])
    def test_fused_kernel_matches(self, pointwise_activation, activation) -> None:
        before, _ = fuse_activations(expand_depthwise(pointwise_activation=pointwise_activation, activation=activation))
        after, fused = fuse_pointwise_strided(before)
        assert fused == 1 and ops(after) == ["FusedPointwiseConv"] and after.opset_imports["flowstack"] == 1
        node = after.graph.nodes[0]
        assert node.inputs == ["x", "w1", "b1", "w", "b"] and node.outputs == after.graph.outputs
        assert node.attrs["pointwise_activation"] == (pointwise_activation or "")
        assert node.attrs["activation"] == (activation or "") and node.attrs["strides"] == [2, 2]
        assert_same_outputs(before, after, atol=1e-4, x=randn(2, 4, 28, 28))
        assert ops(before)[0] in ("FusedConv", "Conv"), "input model was edited"

    def test_runs_in_the_default_pipeline(self) -> None:
        before = expand_depthwise()
        after, report = optimize(before)
        assert report.changes["fuse_pointwise_strided"] == 1 and ops(after) == ["FusedPointwiseConv"]
        assert_same_outputs(before, after, atol=1e-4, x=randn(1, 4, 28, 28))

    @pytest.mark.parametrize("build", [
        lambda: expand_depthwise(side=26),  # under MIN_PLANE_PIXELS: the depthwise runs channels-last
        lambda: expand_depthwise(conv_attrs={"strides": [1, 1]}),
        lambda: expand_depthwise(conv_attrs={"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
        lambda: expand_depthwise(expand_attrs={"strides": [2, 2]}),
        lambda: expand_depthwise(expand_attrs={"pads": [1, 1, 1, 1]}),
    ], ids=["small-plane", "stride-1", "dilated", "strided-expand", "padded-expand"])
    def test_pairs_that_do_not_pay_or_do_not_fit_are_left(self, build) -> None:
        before, _ = fuse_activations(build())
        assert fuse_pointwise_strided(before)[1] == 0

    def test_second_reader_public_output_unknown_shape_or_grouped_conv_is_left(self) -> None:
        before, _ = fuse_activations(expand_depthwise())
        before.graph.outputs.append("a")
        assert fuse_pointwise_strided(before)[1] == 0
        before, _ = fuse_activations(expand_depthwise())
        before.graph.nodes.append(ir.Node("Relu", ["a"], ["other"], name="other"))
        before.graph.outputs.append("other")
        assert fuse_pointwise_strided(before)[1] == 0
        before, _ = fuse_activations(expand_depthwise())
        before.graph.values["a"] = ir.Value("a", dtypes.FLOAT, (-1, 12, -1, -1))
        assert fuse_pointwise_strided(before)[1] == 0
        before, _ = fuse_activations(expand_depthwise())
        before.graph.values["w"] = ir.Value("w", data=randn(12, 3, 3, 3))
        before.graph.nodes[1].attrs["group"] = 4
        assert fuse_pointwise_strided(before)[1] == 0

def projections(biases=(True, True, True), widths=(8, 8, 8), depth=16) -> ir.Model:
    """Three MatMuls reading one [2, 5, depth] input (attention's q, k, v projections), each with or
    without a bias Add, each read by a Relu so the results stay apart."""
    nodes, constants = [], {}
    for i, (bias, width) in enumerate(zip(biases, widths)):
        constants[f"w{i}"] = randn(depth, width)
        nodes.append(ir.Node("MatMul", ["x", f"w{i}"], [f"m{i}"], name=f"proj{i}"))
        out = f"m{i}"
        if bias:
            constants[f"b{i}"] = randn(width)
            nodes.append(ir.Node("Add", [f"b{i}", out] if i == 1 else [out, f"b{i}"], [f"a{i}"], name=f"bias{i}"))
            out = f"a{i}"
        nodes.append(ir.Node("Relu", [out], [f"y{i}"], name=f"relu{i}"))
    shapes = {"x": (2, 5, depth)}
    return model(graph(nodes, ["x"], [f"y{i}" for i in range(len(widths))], constants, shapes))


class TestMergeSiblingMatmuls:
    def test_projections_and_biases_merge_into_one_product_and_split(self) -> None:
        before = projections(widths=(8, 4, 8))
        after, merged = merge_sibling_matmuls(before)
        assert merged == 2 and ops(after) == ["MatMul", "Add", "Split", "Relu", "Relu", "Relu"]
        matmul, add, split = after.graph.nodes[:3]
        assert after.graph.values[matmul.inputs[1]].data.shape == (16, 20)
        assert after.graph.values[add.inputs[1]].data.shape == (20,)
        assert list(after.graph.values[split.inputs[1]].data) == [8, 4, 8] and split.attrs["axis"] == -1
        assert split.outputs == ["a0", "a1", "a2"]
        assert_same_outputs(before, after, x=randn(2, 5, 16))
        assert ops(before).count("MatMul") == 3, "input model was edited"

    def test_biases_stay_apart_unless_every_projection_has_one(self) -> None:
        before = projections(biases=(True, False, True))
        after, merged = merge_sibling_matmuls(before)
        assert merged == 2 and ops(after)[:2] == ["MatMul", "Split"] and ops(after).count("Add") == 2
        assert after.graph.nodes[1].outputs == ["m0", "m1", "m2"]
        assert_same_outputs(before, after, x=randn(2, 5, 16))

    def test_a_public_or_shared_product_keeps_its_bias_apart(self) -> None:
        before = projections()
        before.graph.outputs.append("m1")
        after, merged = merge_sibling_matmuls(before)
        assert merged == 2 and ops(after).count("Add") == 3
        assert_same_outputs(before, after, x=randn(2, 5, 16))

    def test_runs_in_the_default_pipeline(self) -> None:
        before = projections()
        after, report = optimize(before)
        assert report.changes["merge_sibling_matmuls"] == 2 and ops(after).count("MatMul") == 1
        assert_same_outputs(before, after, x=randn(2, 5, 16))

    def test_products_that_cannot_share_a_weight_are_left(self) -> None:
        before = projections()
        before.graph.values["w1"] = ir.Value("w1", data=randn(16, 8).astype(np.float64))  # another dtype
        assert merge_sibling_matmuls(before)[1] == 1
        before = projections()
        before.graph.inputs.append("w1")  # a weight fed at run time
        before.graph.values["w1"] = ir.Value("w1", dtypes.FLOAT, (16, 8))
        assert merge_sibling_matmuls(before)[1] == 1
        before = projections()
        before.graph.values["w2"] = ir.Value("w2", data=randn(3, 16, 8))  # a batched weight
        assert merge_sibling_matmuls(before)[1] == 1
        before = projections(widths=(8,))
        assert merge_sibling_matmuls(before)[1] == 0


class TestCancelTransposes:
    def test_inverse_pair_cancels(self) -> None:
        g = graph(
            [
                ir.Node("Transpose", ["x"], ["t1"], {"perm": [0, 2, 3, 1]}, name="to_nhwc"),
                ir.Node("Transpose", ["t1"], ["t2"], {"perm": [0, 3, 1, 2]}, name="to_nchw"),
                ir.Node("Relu", ["t2"], ["y"], name="relu"),
            ],
            ["x"], ["y"],
        )
        before = model(g)
        after, changed = cancel_transposes(before)
        after, _ = eliminate_dead_code(after)
        assert changed == 1 and ops(after) == ["Relu"] and after.graph.nodes[0].inputs == ["x"]
        assert_same_outputs(before, after, x=randn(2, 3, 4, 5))

    def test_pair_composes_into_one(self) -> None:
        g = graph(
            [
                ir.Node("Transpose", ["x"], ["t1"], {"perm": [1, 0, 2]}, name="a"),
                ir.Node("Transpose", ["t1"], ["y"], {"perm": [0, 2, 1]}, name="b"),
            ],
            ["x"], ["y"],
        )
        before = model(g)
        after, _ = eliminate_dead_code(cancel_transposes(before)[0])
        assert ops(after) == ["Transpose"]
        assert_same_outputs(before, after, x=randn(2, 3, 4))

    def test_reshape_chain_shortens(self) -> None:
        g = graph(
            [
                ir.Node("Reshape", ["x", "s1"], ["r1"], name="r1"),
                ir.Node("Reshape", ["r1", "s2"], ["y"], name="r2"),
            ],
            ["x"], ["y"], constants={"s1": np.array([6, 4], np.int64), "s2": np.array([-1, 2], np.int64)},
        )
        before = model(g)
        after, _ = eliminate_dead_code(cancel_transposes(before)[0])
        assert ops(after) == ["Reshape"] and after.graph.nodes[0].inputs == ["x", "s2"]
        assert_same_outputs(before, after, x=randn(2, 3, 4))

    def test_reshape_copying_dims_is_kept(self) -> None:
        g = graph(
            [ir.Node("Reshape", ["x", "s1"], ["r1"], name="r1"), ir.Node("Reshape", ["r1", "s2"], ["y"], name="r2")],
            ["x"], ["y"], constants={"s1": np.array([6, 4], np.int64), "s2": np.array([0, 2, 2], np.int64)},
        )
        assert cancel_transposes(model(g))[1] == 0


class TestOptimize:
    def test_reaches_fixed_point_and_reports(self, capsys) -> None:
        before = conv_bn("Conv", "Relu")
        before.graph.nodes.insert(0, ir.Node("Identity", ["x"], ["x_read"], name="read"))
        before.graph.nodes[1].inputs[0] = "x_read"
        after, report = optimize(before, verbose=True)
        assert ops(after) == ["FusedConv"]
        assert report.changes["fold_batch_norm"] == 1 and report.changes["fuse_activations"] == 1
        assert report.nodes_before == 4 and report.nodes_after == 1
        assert "BatchNormalization: 1 -> 0" in str(report) and "fold_batch_norm" in capsys.readouterr().out
        assert_same_outputs(before, after, x=randn(2, 3, 5, 5))

    def test_optimizing_twice_changes_nothing(self) -> None:
        once, _ = optimize(conv_bn("Gemm", "Sigmoid"))
        _, report = optimize(once)
        assert report.rounds == 1 and not any(report.changes.values())


class TestTransposeGemmWeights:
    @staticmethod
    def gemm(attrs=None, extra_nodes=(), outputs=("y",)) -> ir.Model:
        x_shape = (6, 3) if (attrs or {}).get("transA") else (3, 6)
        nodes = [ir.Node("Gemm", ["x", "w", "b"], ["y"], dict(attrs or {}), name="fc"), *extra_nodes]
        return model(graph(nodes, ["x"], list(outputs), constants={"w": randn(6, 4), "b": randn(4)},
                           shapes={"x": x_shape, "y": (3, 4)}))

    @pytest.mark.parametrize("attrs", [{}, {"alpha": 0.5, "beta": 2.0}, {"transA": 1}, {"transB": 0}])
    def test_weight_is_stored_transposed(self, attrs) -> None:
        before = self.gemm(attrs)
        after, changed = transpose_gemm_weights(before)
        node = after.graph.nodes[0]
        assert changed == 1 and node.attrs["transB"] == 1
        np.testing.assert_array_equal(after.graph.values[node.inputs[1]].data, before.graph.values["w"].data.T)
        assert after.graph.values[node.inputs[1]].data.flags.c_contiguous
        assert_same_outputs(before, after, x=randn(*before.graph.values["x"].shape))
        assert transpose_gemm_weights(after)[1] == 0
        assert before.graph.nodes[0].attrs.get("transB", 0) == 0  # the input model is untouched

    def test_weight_shared_by_gemms_is_transposed_once(self) -> None:
        second = ir.Node("Gemm", ["x", "w"], ["z"], name="fc2")
        before = self.gemm(extra_nodes=[second], outputs=("y", "z"))
        after, changed = transpose_gemm_weights(before)
        assert changed == 1
        assert after.graph.nodes[0].inputs[1] == after.graph.nodes[1].inputs[1] != "w"
        assert_same_outputs(before, after, x=randn(3, 6))
        optimized, _ = optimize(before)
        assert "w" not in optimized.graph.values  # the untransposed copy is not kept beside it

    @pytest.mark.parametrize("other", [
        ir.Node("MatMul", ["x", "w"], ["z"], name="mm"),  # read as a (K, N) matrix elsewhere
        ir.Node("Gemm", ["w", "x"], ["z"], {"transA": 1, "transB": 1}, name="fc2"),  # as A
        ir.Node("Gemm", ["x", "w", "b"], ["z"], {"transB": 1}, name="fc2"),  # already transposed there
    ], ids=["matmul", "as-A", "transB-1"])
    def test_weight_read_otherwise_is_left_alone(self, other) -> None:
        before = self.gemm(extra_nodes=[other], outputs=("y", "z"))
        assert transpose_gemm_weights(before)[1] == 0

    def test_weight_fed_at_run_time_is_left_alone(self) -> None:
        before = self.gemm()
        del before.graph.values["w"]
        before.graph.inputs.append("w")
        before.graph.values["w"] = ir.Value("w", dtypes.FLOAT, (6, 4))
        assert transpose_gemm_weights(before)[1] == 0


class TestGemmWeightLayoutByShape:
    """Small weights with many outputs stay (K, N) row-major; large ones and few outputs go (N, K)."""

    @staticmethod
    def linear(k: int, n: int, attrs: dict, rows: int = 16, dtype=np.float32) -> ir.Model:
        w = randn(n, k) if attrs.get("transB") else randn(k, n)
        x_shape = (k, rows) if attrs.get("transA") else (rows, k)
        nodes = [ir.Node("Gemm", ["x", "w", "b"], ["y"], dict(attrs), name="fc")]
        g = graph(nodes, ["x"], ["y"], constants={"w": w.astype(dtype), "b": randn(n).astype(dtype)},
                  shapes={"x": x_shape, "y": (rows, n)})
        g.values["x"].dtype = g.values["y"].dtype = dtypes.from_numpy(np.dtype(dtype))
        return model(g)

    @pytest.mark.parametrize("k, n, row_major", [
        (120, 84, True), (200, 100, True), (64, 64, True),  # LeNet's, and exactly 20,000 elements
        (784, 128, False), (400, 120, False), (200, 101, False),  # too many elements
        (84, 10, False), (300, 63, False),  # too few outputs
    ])
    @pytest.mark.parametrize("attrs", [{"transB": 1}, {"transB": 0}, {"transB": 1, "alpha": 0.5, "beta": 2.0},
                                       {"transA": 1, "transB": 1}], ids=["nk", "kn", "alpha-beta", "transA"])
    def test_layout_follows_the_shape(self, k, n, row_major, attrs) -> None:
        before = self.linear(k, n, attrs)
        after, changed = transpose_gemm_weights(before)
        node = after.graph.nodes[0]
        assert node.attrs["transB"] == (0 if row_major else 1)
        assert changed == (bool(attrs["transB"]) == row_major)
        assert after.graph.values[node.inputs[1]].data.shape == ((k, n) if row_major else (n, k))
        assert after.graph.values[node.inputs[1]].data.flags.c_contiguous
        assert transpose_gemm_weights(after)[1] == 0
        x = randn(*before.graph.values["x"].shape)
        # the two layouts sum K products in different orders: float32 rounding of outputs up to
        # ~30 reaches 2e-5 (a transposed or misplaced weight would be off by whole units)
        assert_same_outputs(before, after, rtol=1e-4, atol=1e-4, x=x)

    @pytest.mark.parametrize("rows", [1, 2, 16, 64])
    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    def test_row_major_weight_runs_at_any_batch_and_dtype(self, rows, dtype) -> None:
        before = self.linear(120, 84, {"transB": 1}, rows=rows, dtype=dtype)
        after, changed = transpose_gemm_weights(before)
        assert changed == 1 and after.graph.nodes[0].attrs["transB"] == 0
        x = RNG.standard_normal(before.graph.values["x"].shape).astype(dtype)
        got = run(after, x=x)["y"]
        w, b = before.graph.values["w"].data, before.graph.values["b"].data
        assert got.dtype == dtype
        np.testing.assert_allclose(got, x @ w.T + b, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-4)

    def test_optimized_model_written_back_to_onnx_keeps_the_layout(self) -> None:
        onnx = pytest.importorskip("onnx")
        reference = pytest.importorskip("onnx.reference")
        from exporter.onnx_export import to_onnx  # needs onnx

        before = self.linear(120, 84, {"transB": 1})
        after, _ = optimize(before)
        proto = to_onnx(after)
        onnx.checker.check_model(proto)
        (gemm,) = [node for node in proto.graph.node if node.op_type == "Gemm"]
        assert {a.name: a.i for a in gemm.attribute}.get("transB", 0) == 0
        x = randn(16, 120)
        (want,) = reference.ReferenceEvaluator(proto).run(None, {"x": x})
        np.testing.assert_allclose(want, run(before, x=x)["y"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name, run_pass", DEFAULT_PASSES, ids=[n for n, _ in DEFAULT_PASSES])
@pytest.mark.parametrize("build", [lambda: conv_bn("Conv", "Relu"), lambda: conv_bn("MatMulAdd", "Clip"), if_model,
                                   lambda: conv_pool("Relu")],
                         ids=["conv_bn_relu", "matmul_bn_clip", "if_capture", "conv_bn_relu_pool"])
def test_every_pass_preserves_outputs(name, run_pass, build) -> None:
    before = build()
    counts = op_counts(before.graph)
    after, _ = run_pass(before)
    assert op_counts(before.graph) == counts, f"{name} edited its input"
    feeds = {"x": randn(*(before.graph.values["x"].shape or (3,)))}
    if "c" in before.graph.inputs:
        for c in (True, False):
            assert_same_outputs(before, after, rtol=1e-4, atol=1e-5, **feeds, c=np.array(c))
    else:
        assert_same_outputs(before, after, rtol=1e-4, atol=1e-5, **feeds)
