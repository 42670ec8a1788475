"""The ai.onnx.ml kernels on models built with onnx.helper, against onnxruntime.

Each case is one node in a model of its own, imported (exporter.onnx_import), written to .flow and
run by the edge runtime; onnxruntime runs the same model. Malformed attributes must fail with an
error naming the node and the attribute, never an IndexError from inside NumPy or a hang.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import edge_runtime
from edge_runtime.plan import ExecutionError
from exporter.onnx_import import onnx_to_flow_bytes

ort = pytest.importorskip("onnxruntime")

ML = "ai.onnx.ml"
RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 4)).astype(np.float32)


def _model(node, inputs, outputs, ml_opset=3):
    graph = helper.make_graph([node], "ml", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _both(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    got = edge_runtime.load(onnx_to_flow_bytes(model)).run(feeds)
    return want, [got[o.name] for o in model.graph.output]


def _assert_same(model, feeds, atol=1e-5):
    want, got = _both(model, feeds)
    for w, g in zip(want, got):
        if w.dtype.kind in "OUS":
            np.testing.assert_array_equal(np.asarray(g).astype(str), w.astype(str))
        else:
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)


def _run_ours(model, feeds):
    return edge_runtime.load(onnx_to_flow_bytes(model)).run(feeds)


# ------------------------------------------------------------------------------ tree ensembles

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def _forest(mode="BRANCH_LEQ", missing=(0, 0, 0)):
    """Two trees: tree 0 splits twice (features 0 then 1), tree 1 once (feature 2); leaves 2, 3, 4 and 1, 2."""
    return dict(
        nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1],
        nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
        nodes_featureids=[0, 1, 0, 0, 0, 2, 0, 0],
        nodes_modes=[mode, "BRANCH_LEQ", "LEAF", "LEAF", "LEAF", mode, "LEAF", "LEAF"],
        nodes_values=[0.0, 0.25, 0, 0, 0, -0.5, 0, 0],
        nodes_truenodeids=[1, 3, 0, 0, 0, 1, 0, 0],
        nodes_falsenodeids=[2, 4, 0, 0, 0, 2, 0, 0],
        nodes_missing_value_tracks_true=[missing[0], missing[1], 0, 0, 0, missing[2], 0, 0],
    )


LEAVES = [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2)]


def _regressor(mode="BRANCH_LEQ", aggregate="SUM", post="NONE", base=None, targets=1, missing=(0, 0, 0), **extra):
    attrs = _forest(mode, missing)
    tree, node, target, weight = [], [], [], []
    for k, (t, n) in enumerate(LEAVES):
        for j in range(targets):
            tree.append(t), node.append(n), target.append(j), weight.append(0.1 * (k + 1) * (j + 1) - 0.2)
    attrs.update(target_treeids=tree, target_nodeids=node, target_ids=target, target_weights=weight,
                 n_targets=targets, aggregate_function=aggregate, post_transform=post, **extra)
    if base is not None:
        attrs["base_values"] = base
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, name="forest", **attrs)
    return _model(node, [("X", TensorProto.FLOAT, [None, 4])], [("Y", TensorProto.FLOAT, [None, targets])])


ROWS = pytest.mark.parametrize("rows", [64, 1], ids=["batch", "one-row"])  # one row: Forest._one_row


@ROWS
@pytest.mark.parametrize("mode", MODES)
def test_regressor_node_modes(mode, rows):
    x = X.copy()
    x[::5, 0] = 0.0  # equal to the threshold: EQ/NEQ and LEQ/LT differ here
    x[::7, 2] = -0.5
    for start in range(0, 64, rows * 9 + 1):
        _assert_same(_regressor(mode), {"X": x[start:start + rows]})


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("targets", [1, 3])
def test_regressor_aggregates_and_base_values(aggregate, targets):
    _assert_same(_regressor(aggregate=aggregate, targets=targets, base=[0.5] * targets), {"X": X})


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_regressor_post_transforms_on_several_targets(post):
    _assert_same(_regressor(post=post, targets=3), {"X": X})


def test_regressor_probit_on_one_target():
    _assert_same(_regressor(post="PROBIT", base=[0.5]), {"X": X * 0.1})


@ROWS
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("missing", [(1, 0, 1), (0, 0, 0)], ids=["tracked", "untracked"])
def test_missing_values_follow_the_tracked_branch(mode, missing, rows):
    x = X.copy()
    x[::3, 0] = np.nan
    x[1::4, 1] = np.nan
    x[::2, 2] = np.nan
    for start in range(0, 64, rows * 9 + 1):
        _assert_same(_regressor(mode, missing=missing, targets=2), {"X": x[start:start + rows]})


def test_double_attributes_as_tensors():
    attrs = _forest()
    values = np.asarray(attrs.pop("nodes_values"), np.float64)
    weights = np.asarray([0.3, -0.2, 0.7, 0.11, 0.5])
    node = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=1, **attrs,
        nodes_values_as_tensor=numpy_helper.from_array(values), target_weights_as_tensor=numpy_helper.from_array(weights),
        target_treeids=[t for t, _ in LEAVES], target_nodeids=[n for _, n in LEAVES], target_ids=[0] * 5,
        base_values_as_tensor=numpy_helper.from_array(np.asarray([0.25])))
    _assert_same(_model(node, [("X", TensorProto.DOUBLE, [None, 4])], [("Y", TensorProto.FLOAT, [None, 1])]),
                 {"X": X.astype(np.float64)})


def _classifier(labels, class_ids, weights, post="NONE", base=None, mode="BRANCH_LEQ"):
    attrs = _forest(mode)
    tree, node, cls, weight = [], [], [], []
    for k, (t, n) in enumerate(LEAVES):
        for c, w in zip(class_ids, weights):
            tree.append(t), node.append(n), cls.append(c), weight.append(w * (k + 1) / 5)
    key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_int64s"
    attrs.update(class_treeids=tree, class_nodeids=node, class_ids=cls, class_weights=weight, post_transform=post,
                 **{key: labels})
    if base is not None:
        attrs["base_values"] = base
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["Y", "Z"], domain=ML, name="forest", **attrs)
    label_type = TensorProto.STRING if key == "classlabels_strings" else TensorProto.INT64
    return _model(node, [("X", TensorProto.FLOAT, [None, 4])],
                  [("Y", label_type, [None]), ("Z", TensorProto.FLOAT, [None, len(labels)])])


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("labels", [[3, 7, 11], ["cat", "dog", "emu"]], ids=["int64", "string"])
def test_classifier_multiclass(labels, post):
    _assert_same(_classifier(labels, [0, 1, 2], [0.2, 0.5, 0.3], post=post, base=[0.1, 0.0, -0.1]), {"X": X})


@pytest.mark.parametrize("weights", [[0.6], [-0.4]], ids=["positive", "mixed-sign"])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_classifier_binary_with_one_class_of_weights(weights, post):
    # skl2onnx's binary forests: weights for class 1's probability only
    _assert_same(_classifier([0, 1], [1] * len(weights), weights, post=post), {"X": X})
    _assert_same(_classifier([0, 1], [0] * len(weights), weights, post=post), {"X": X})


@pytest.mark.parametrize("labels, class_ids, weights, post, base", [
    ([0, 1], [1], [0.6], "NONE", [0.1, 0.2]),
    ([0, 1], [0, 1], [0.3, 0.7], "NONE", [0.1, 0.2]),
    ([0, 1], [1], [0.6], "NONE", [0.3]),
    ([0, 1], [0, 1], [0.3, -0.7], "LOGISTIC", [0.2]),
    ([0, 1], [1], [-0.4], "SOFTMAX", None),
    ([0, 1], [1], [0.6], "PROBIT", None),
    ([3, 7, 11], [0, 1, 2], [0.2, 0.5, 0.3], "PROBIT", None),
], ids=["binary-two-bases", "both-two-bases", "binary-one-base", "both-one-base-logistic", "binary-softmax",
        "binary-probit", "multiclass-probit"])
def test_classifier_base_values_and_transforms_as_onnxruntime(labels, class_ids, weights, post, base):
    _assert_same(_classifier(labels, class_ids, weights, post=post, base=base), {"X": X * 0.1})


def test_classifier_binary_with_both_classes_weighted():
    _assert_same(_classifier(["no", "yes"], [0, 1], [0.3, 0.7]), {"X": X})


def test_tree_ensemble_v5_with_set_membership_and_aggregates():
    splits = np.asarray([0.0, 0.0, -0.5], np.float32)
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain=ML, n_targets=2, aggregate_function=3, post_transform=0,
        tree_roots=[0, 2],
        nodes_modes=numpy_helper.from_array(np.asarray([6, 0, 3], np.uint8)),
        nodes_featureids=[0, 1, 2], nodes_splits=numpy_helper.from_array(splits),
        nodes_truenodeids=[1, 0, 2], nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[1, 1, 3], nodes_falseleafs=[1, 1, 1],
        membership_values=numpy_helper.from_array(np.asarray([1.0, 2.0, np.nan], np.float32)),
        leaf_targetids=[0, 1, 0, 1], leaf_weights=numpy_helper.from_array(np.asarray([1, 2, 3, 4], np.float32)))
    model = _model(node, [("X", TensorProto.FLOAT, [None, 4])], [("Y", TensorProto.FLOAT, [None, 2])], ml_opset=5)
    x = X.copy()
    x[::3, 0] = 1.0
    x[1::3, 0] = 2.0
    got = _run_ours(model, {"X": x})["Y"]
    member = np.isin(x[:, 0], [1.0, 2.0])
    tree0 = np.where(member[:, None], np.where((x[:, 1] <= 0)[:, None], [1, 0], [0, 2]), [0, 2])
    tree1 = np.where((x[:, 2] > -0.5)[:, None], [3, 0], [0, 4])
    np.testing.assert_array_equal(got, np.maximum(tree0, tree1).astype(np.float32))
    for row in range(6):  # one row at a time takes Forest._one_row
        np.testing.assert_array_equal(_run_ours(model, {"X": x[row:row + 1]})["Y"], got[row:row + 1])


# ------------------------------------------------------------------------------ bad trees

def _bad(model, match):
    with pytest.raises((ValueError, ExecutionError), match=match):
        _run_ours(model, {"X": X})


def _set(index, value):
    def edit(values):
        values[index] = value
    return edit


def _drop_last(values):
    del values[-1]


@pytest.mark.parametrize("attribute, edit, message", [
    ("nodes_falsenodeids", _set(1, 42), r"tree 0 node 1: nodes_falsenodeids points to node id 42, which tree 0 does not have"),
    ("nodes_truenodeids", _set(1, 0), r"cycle through TreeEnsembleRegressor tree 0 node"),  # back to the root
    ("nodes_featureids", _set(5, 9), r"tree 1 node 0 reads feature 9 \(nodes_featureids\), but X has 4 columns"),
    ("target_nodeids", _set(0, 17), r"weight 0 \(target_treeids/target_nodeids\) is for tree 0 node 17"),
    ("nodes_values", _drop_last, r"nodes_values has 7 entries, but there are 8 nodes"),
], ids=["child-out-of-range", "cycle", "feature-out-of-range", "weight-for-no-node", "short-list"])
def test_malformed_tree_names_node_and_attribute(attribute, edit, message):
    model = _regressor()
    attr = next(a for a in model.graph.node[0].attribute if a.name == attribute)
    edit(attr.floats if attr.type == attr.FLOATS else attr.ints)
    _bad(model, message)


def test_class_id_beyond_the_labels():
    _bad(_classifier([0, 1, 2], [0, 1, 5], [0.2, 0.3, 0.5]), r"is for target/class 5, outside the 3")


def test_tree_ensemble_v5_leaf_out_of_range():
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["Y"], domain=ML, n_targets=1, tree_roots=[0],
        nodes_modes=numpy_helper.from_array(np.asarray([0], np.uint8)), nodes_featureids=[0],
        nodes_splits=numpy_helper.from_array(np.asarray([0.0], np.float32)),
        nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[3], nodes_falseleafs=[1],
        leaf_targetids=[0, 0], leaf_weights=numpy_helper.from_array(np.asarray([1, 2], np.float32)))
    model = _model(node, [("X", TensorProto.FLOAT, [None, 4])], [("Y", TensorProto.FLOAT, [None, 1])], ml_opset=5)
    _bad(model, r"TreeEnsemble node 0: nodes_falsenodeids points to leaf 3, but there are 2 leafs")


# ------------------------------------------------------------------------------ linear models and SVMs

@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_linear_classifier(post):
    coef = RNG.standard_normal(12).astype(np.float32).tolist()
    node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain=ML, coefficients=coef,
                            intercepts=[0.1, -0.2, 0.3], classlabels_ints=[1, 2, 3], post_transform=post)
    _assert_same(_model(node, [("X", TensorProto.FLOAT, [None, 4])],
                        [("Y", TensorProto.INT64, [None]), ("Z", TensorProto.FLOAT, [None, 3])]), {"X": X})


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_linear_classifier_binary_one_row(post):
    node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain=ML, coefficients=[0.5, -1.0, 0.25, 2.0],
                            intercepts=[0.1], classlabels_strings=["neg", "pos"], post_transform=post)
    _assert_same(_model(node, [("X", TensorProto.FLOAT, [None, 4])],
                        [("Y", TensorProto.STRING, [None]), ("Z", TensorProto.FLOAT, [None, 2])]), {"X": X})


def test_linear_regressor():
    node = helper.make_node("LinearRegressor", ["X"], ["Y"], domain=ML, coefficients=[float(c) for c in range(8)], intercepts=[1.0, 2.0],
                            targets=2)
    _assert_same(_model(node, [("X", TensorProto.FLOAT, [None, 4])], [("Y", TensorProto.FLOAT, [None, 2])]), {"X": X})


SV = RNG.standard_normal((6, 4)).astype(np.float32)


@pytest.mark.parametrize("kernel, params", [("LINEAR", [0.0, 0.0, 0]), ("POLY", [0.5, 1.0, 3]), ("RBF", [0.3, 0, 0]),
                                            ("SIGMOID", [0.2, 0.1, 0])])
@pytest.mark.parametrize("probabilities", [False, True], ids=["votes", "probabilities"])
def test_svm_classifier_one_vs_one(kernel, params, probabilities):
    extra = dict(prob_a=[-1.5, -2.0, -1.0], prob_b=[0.1, -0.2, 0.05]) if probabilities else {}
    node = helper.make_node(
        "SVMClassifier", ["X"], ["Y", "Z"], domain=ML, kernel_type=kernel, kernel_params=params,
        classlabels_ints=[4, 5, 6], vectors_per_class=[2, 2, 2], support_vectors=SV.reshape(-1).tolist(),
        coefficients=RNG.standard_normal(12).round(3).tolist(), rho=[0.1, -0.3, 0.2], **extra)
    width = 3
    _assert_same(_model(node, [("X", TensorProto.FLOAT, [None, 4])],
                        [("Y", TensorProto.INT64, [None]), ("Z", TensorProto.FLOAT, [None, width])]), {"X": X})


@pytest.mark.parametrize("kernel", ["LINEAR", "RBF"])
def test_svm_regressor(kernel):
    node = helper.make_node("SVMRegressor", ["X"], ["Y"], domain=ML, kernel_type=kernel, kernel_params=[0.3, 0, 0],
                            n_supports=6, support_vectors=SV.reshape(-1).tolist(),
                            coefficients=[0.5, -0.25, 1.0, 0.1, -0.7, 0.3], rho=[0.2])
    _assert_same(_model(node, [("X", TensorProto.FLOAT, [None, 4])], [("Y", TensorProto.FLOAT, [None, 1])]), {"X": X})


# ------------------------------------------------------------------------------ preprocessing

def _unary(op, x, out_type, in_type=TensorProto.FLOAT, **attrs):
    node = helper.make_node(op, ["X"], ["Y"], domain=ML, **attrs)
    return _model(node, [("X", in_type, list(x.shape))], [("Y", out_type, None)]), {"X": x}


@pytest.mark.parametrize("op, attrs", [
    ("Scaler", dict(offset=[0.5, 0, -1, 2], scale=[2.0, 1.0, 0.5, 3.0])),
    ("Scaler", dict(offset=[0.5], scale=[2.0])),
    ("Normalizer", dict(norm="MAX")),
    ("Normalizer", dict(norm="L1")),
    ("Normalizer", dict(norm="L2")),
    ("Binarizer", dict(threshold=0.3)),
    ("Imputer", dict(imputed_value_floats=[9.0, 8.0, 7.0, 6.0], replaced_value_float=float("nan"))),
], ids=["scaler", "scaler-broadcast", "max", "l1", "l2", "binarizer", "imputer"])
def test_float_preprocessing(op, attrs):
    x = X.copy()
    x[::4, 1] = np.nan if op == "Imputer" else x[::4, 1]
    _assert_same(*_unary(op, x, TensorProto.FLOAT, **attrs))


def test_imputer_int64():
    x = np.asarray([[1, -1, 3], [-1, 5, -1]], np.int64)
    _assert_same(*_unary("Imputer", x, TensorProto.INT64, TensorProto.INT64, imputed_value_int64s=[7],
                         replaced_value_int64=-1))


def test_array_feature_extractor_and_bad_index():
    node = helper.make_node("ArrayFeatureExtractor", ["X", "I"], ["Y"], domain=ML)
    model = _model(node, [("X", TensorProto.FLOAT, [None, 4]), ("I", TensorProto.INT64, [None])],
                   [("Y", TensorProto.FLOAT, None)])
    _assert_same(model, {"X": X, "I": np.asarray([3, 0, 3], np.int64)})
    with pytest.raises(ExecutionError, match=r"index 4 \(input Y\) is out of range for X's last dimension of 4"):
        _run_ours(model, {"X": X, "I": np.asarray([4], np.int64)})


@pytest.mark.parametrize("attrs, x, in_type, out_type", [
    (dict(keys_strings=["a", "b"], values_int64s=[1, 2], default_int64=-7), np.asarray(["a", "z", "b"], object),
     TensorProto.STRING, TensorProto.INT64),
    (dict(keys_int64s=[5, 6], values_strings=["five", "six"]), np.asarray([6, 5, 0], np.int64),
     TensorProto.INT64, TensorProto.STRING),
    (dict(keys_floats=[0.5, 1.5], values_floats=[10.0, 20.0], default_float=-1.0),
     np.asarray([1.5, 0.5, 2.0], np.float32), TensorProto.FLOAT, TensorProto.FLOAT),
], ids=["string-int", "int-string", "float-float"])
def test_label_encoder(attrs, x, in_type, out_type):
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, **attrs)
    _assert_same(_model(node, [("X", in_type, [None])], [("Y", out_type, [None])], ml_opset=2), {"X": x})


@pytest.mark.parametrize("x, in_type, out_type", [
    (np.asarray(["b", "zz", "a"], object), TensorProto.STRING, TensorProto.INT64),
    (np.asarray([1, 7, 0], np.int64), TensorProto.INT64, TensorProto.STRING),
], ids=["string-position", "position-string"])
def test_label_encoder_opset_1_classes(x, in_type, out_type):
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, classes_strings=["a", "b", "c"],
                            default_int64=-3, default_string="none")
    _assert_same(_model(node, [("X", in_type, [None])], [("Y", out_type, [None])], ml_opset=1), {"X": x})


def test_label_encoder_nan_key_matches_nan():
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML, keys_floats=[1.0, float("nan"), -2.5],
                            values_int64s=[10, 20, 30], default_int64=0)
    model = _model(node, [("X", TensorProto.FLOAT, [None])], [("Y", TensorProto.INT64, [None])], ml_opset=4)
    _assert_same(model, {"X": np.asarray([np.nan, -2.5, 1.0, 3.0], np.float32)})


def test_label_encoder_tensor_attributes_and_default():
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain=ML,
                            keys_tensor=numpy_helper.from_array(np.asarray([1, 2, 3], np.int64)),
                            values_tensor=numpy_helper.from_array(np.asarray([0.5, 1.5, 2.5], np.float32)),
                            default_tensor=numpy_helper.from_array(np.asarray([-9.0], np.float32)))
    model = _model(node, [("X", TensorProto.INT64, [None])], [("Y", TensorProto.FLOAT, [None])], ml_opset=4)
    _assert_same(model, {"X": np.asarray([3, 4, 1], np.int64)})


def test_one_hot_encoder_and_category_mapper():
    x = np.asarray([["a", "c"], ["b", "zz"]], object)
    _assert_same(*_unary("OneHotEncoder", x, TensorProto.FLOAT, TensorProto.STRING, cats_strings=["a", "b", "c"]))
    _assert_same(*_unary("CategoryMapper", x, TensorProto.INT64, TensorProto.STRING, cats_strings=["a", "b", "c"],
                         cats_int64s=[10, 20, 30], default_int64=-5))
    ints = np.asarray([20, 99, 10], np.int64)
    _assert_same(*_unary("CategoryMapper", ints, TensorProto.STRING, TensorProto.INT64, cats_strings=["a", "b"],
                         cats_int64s=[10, 20], default_string="?"))


def test_feature_vectorizer():
    node = helper.make_node("FeatureVectorizer", ["A", "B"], ["Y"], domain=ML, inputdimensions=[2, 3])
    model = _model(node, [("A", TensorProto.FLOAT, [None, 2]), ("B", TensorProto.FLOAT, [None, 3])],
                   [("Y", TensorProto.FLOAT, [None, 5])])
    _assert_same(model, {"A": X[:5, :2], "B": X[:5, 1:4]})


def test_zip_map_matches_onnxruntime_maps():
    node = helper.make_node("ZipMap", ["X"], ["Z"], domain=ML, classlabels_strings=["a", "b", "c"])
    graph = helper.make_graph([node], "zip", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
                              [helper.make_value_info("Z", helper.make_sequence_type_proto(
                                  helper.make_map_type_proto(TensorProto.STRING,
                                                             helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
                              )])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)], ir_version=10)
    want, got = _both(model, {"X": X[:4, :3]})
    assert got[0] == want[0]


@pytest.mark.parametrize("probabilities", [False, True], ids=["votes", "probabilities"])
def test_svm_classifier_binary(probabilities):
    extra = dict(prob_a=[-1.5], prob_b=[0.1]) if probabilities else {}
    node = helper.make_node(
        "SVMClassifier", ["X"], ["Y", "Z"], domain=ML, kernel_type="RBF", kernel_params=[0.3, 0.0, 0.0],
        classlabels_strings=["no", "yes"], vectors_per_class=[3, 3], support_vectors=SV.reshape(-1).tolist(),
        coefficients=[0.5, -0.2, 0.3, -0.6, 0.4, -0.1], rho=[0.05], **extra)
    _assert_same(_model(node, [("X", TensorProto.FLOAT, [None, 4])],
                        [("Y", TensorProto.STRING, [None]), ("Z", TensorProto.FLOAT, [None, 2])]), {"X": X})


def test_svm_classifier_linear_without_support_vectors():
    node = helper.make_node("SVMClassifier", ["X"], ["Y", "Z"], domain=ML, kernel_type="LINEAR", kernel_params=[0.0, 0.0, 0.0],
                            classlabels_ints=[0, 1, 2], coefficients=RNG.standard_normal(12).round(3).tolist(),
                            rho=[0.1, 0.2, 0.3])
    _assert_same(_model(node, [("X", TensorProto.FLOAT, [None, 4])],
                        [("Y", TensorProto.INT64, [None]), ("Z", TensorProto.FLOAT, [None, 3])]), {"X": X})


def test_linear_classifier_label_count_mismatch():
    node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain=ML, name="linear", coefficients=[0.5] * 12,
                            classlabels_ints=[1, 2])
    model = _model(node, [("X", TensorProto.FLOAT, [None, 4])],
                   [("Y", TensorProto.INT64, [None]), ("Z", TensorProto.FLOAT, [None, 3])])
    with pytest.raises(ExecutionError, match=r"node 0 'linear'.*2 class labels for 3 rows of coefficients"):
        _run_ours(model, {"X": X})


def test_zip_map_label_count_mismatch():
    node = helper.make_node("ZipMap", ["X"], ["Z"], domain=ML, name="zip", classlabels_int64s=[1, 2])
    graph = helper.make_graph([node], "zip", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
                              [helper.make_value_info("Z", helper.make_sequence_type_proto(
                                  helper.make_map_type_proto(TensorProto.INT64,
                                                             helper.make_tensor_type_proto(TensorProto.FLOAT, []))))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    with pytest.raises(ExecutionError, match=r"node 0 'zip'.*X must be \[N, 2\] \(one column per class label\)"):
        _run_ours(model, {"X": X[:, :3]})


def test_linear_classifier_one_score_one_label():
    node = helper.make_node("LinearClassifier", ["X"], ["Y", "Z"], domain=ML, coefficients=[0.5, -1.0, 0.25, 2.0],
                            classlabels_ints=[7])
    model = _model(node, [("X", TensorProto.FLOAT, [None, 4])],
                   [("Y", TensorProto.INT64, [None]), ("Z", TensorProto.FLOAT, [None, 1])])
    got = _run_ours(model, {"X": X})
    score = X @ np.asarray([0.5, -1.0, 0.25, 2.0], np.float32)
    np.testing.assert_array_equal(got["Y"], np.where(score >= 0, 7, 0))
    np.testing.assert_allclose(got["Z"][:, 0], score, rtol=1e-6)
