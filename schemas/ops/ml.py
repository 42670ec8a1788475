"""Classical machine-learning ops of the ``ai.onnx.ml`` domain: what scikit-learn models export to.

skl2onnx (and the LightGBM/XGBoost converters) write a scikit-learn pipeline as these ops: tree
ensembles, linear and SVM models, the preprocessing steps (Scaler, Normalizer, Imputer, encoders)
and ZipMap, which turns a probability matrix into one {label: probability} map per row.

Each op carries every attribute of its newest version; older versions use a subset (opset 3's
``*_as_tensor`` attributes, LabelEncoder 4's tensor forms), so one declaration serves them all.
TreeEnsemble (opset 5) is a new op, not a new version of the two it replaces.
"""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import INT64, same_as_input
from schemas.registry import REQUIRED, Attr, TensorType, op

ML = "ai.onnx.ml"
FLOAT = np.dtype(np.float32)
STRING = np.dtype(object)


def _rows(ctx) -> int | None:
    """The batch dimension of X: a 1-D X is one row, a 2-D X is [N, C]."""
    shape = ctx.input(0).shape
    if shape is None:
        return None
    return 1 if len(shape) <= 1 else shape[0]


def _label_dtype(ctx, strings_attr: str):
    return STRING if ctx.attrs.get(strings_attr) else INT64


def _classifier_outputs(ctx, strings_attr: str, n_classes: int | None) -> list[TensorType]:
    n = _rows(ctx)
    return [TensorType(_label_dtype(ctx, strings_attr), (n,)), TensorType(FLOAT, (n, n_classes))]


_TREE_NODES = {
    "nodes_falsenodeids": Attr("ints"),
    "nodes_featureids": Attr("ints"),
    "nodes_hitrates": Attr("floats"),
    "nodes_hitrates_as_tensor": Attr("tensor"),
    "nodes_missing_value_tracks_true": Attr("ints"),
    "nodes_modes": Attr("strings"),
    "nodes_nodeids": Attr("ints"),
    "nodes_treeids": Attr("ints"),
    "nodes_truenodeids": Attr("ints"),
    "nodes_values": Attr("floats"),
    "nodes_values_as_tensor": Attr("tensor"),
    "post_transform": Attr("string", "NONE"),
    "base_values": Attr("floats"),
    "base_values_as_tensor": Attr("tensor"),
}


@op("TreeEnsembleClassifier", domain=ML, inputs=["X"], outputs=["Y", "Z"],
    attrs={**_TREE_NODES,
           "class_ids": Attr("ints"),
           "class_nodeids": Attr("ints"),
           "class_treeids": Attr("ints"),
           "class_weights": Attr("floats"),
           "class_weights_as_tensor": Attr("tensor"),
           "classlabels_int64s": Attr("ints"),
           "classlabels_strings": Attr("strings")})
def _tree_ensemble_classifier(ctx):
    labels = ctx.attrs.get("classlabels_strings") or ctx.attrs.get("classlabels_int64s") or ()
    return _classifier_outputs(ctx, "classlabels_strings", len(labels) or None)


@op("TreeEnsembleRegressor", domain=ML, inputs=["X"], outputs=["Y"],
    attrs={**_TREE_NODES,
           "aggregate_function": Attr("string", "SUM"),
           "n_targets": Attr("int"),
           "target_ids": Attr("ints"),
           "target_nodeids": Attr("ints"),
           "target_treeids": Attr("ints"),
           "target_weights": Attr("floats"),
           "target_weights_as_tensor": Attr("tensor")})
def _tree_ensemble_regressor(ctx):
    return [TensorType(FLOAT, (_rows(ctx), ctx.attrs.get("n_targets")))]


@op("TreeEnsemble", domain=ML, inputs=["X"], outputs=["Y"],
    attrs={"aggregate_function": Attr("int", 1),
           "leaf_targetids": Attr("ints", REQUIRED),
           "leaf_weights": Attr("tensor", REQUIRED),
           "membership_values": Attr("tensor"),
           "n_targets": Attr("int"),
           "nodes_falseleafs": Attr("ints", REQUIRED),
           "nodes_falsenodeids": Attr("ints", REQUIRED),
           "nodes_featureids": Attr("ints", REQUIRED),
           "nodes_hitrates": Attr("tensor"),
           "nodes_missing_value_tracks_true": Attr("ints"),
           "nodes_modes": Attr("tensor", REQUIRED),
           "nodes_splits": Attr("tensor", REQUIRED),
           "nodes_trueleafs": Attr("ints", REQUIRED),
           "nodes_truenodeids": Attr("ints", REQUIRED),
           "post_transform": Attr("int", 0),
           "tree_roots": Attr("ints", REQUIRED)})
def _tree_ensemble(ctx):
    return [TensorType(ctx.input(0).dtype, (_rows(ctx), ctx.attrs.get("n_targets")))]


@op("LinearClassifier", domain=ML, inputs=["X"], outputs=["Y", "Z"],
    attrs={"coefficients": Attr("floats", REQUIRED),
           "intercepts": Attr("floats"),
           "classlabels_ints": Attr("ints"),
           "classlabels_strings": Attr("strings"),
           "multi_class": Attr("int", 0),
           "post_transform": Attr("string", "NONE")})
def _linear_classifier(ctx):
    return _classifier_outputs(ctx, "classlabels_strings", None)


@op("LinearRegressor", domain=ML, inputs=["X"], outputs=["Y"],
    attrs={"coefficients": Attr("floats"),
           "intercepts": Attr("floats"),
           "targets": Attr("int", 1),
           "post_transform": Attr("string", "NONE")})
def _linear_regressor(ctx):
    return [TensorType(FLOAT, (_rows(ctx), ctx.attrs["targets"]))]


_SVM = {
    "coefficients": Attr("floats"),
    "kernel_params": Attr("floats"),
    "kernel_type": Attr("string", "LINEAR"),
    "post_transform": Attr("string", "NONE"),
    "rho": Attr("floats"),
    "support_vectors": Attr("floats"),
}


@op("SVMClassifier", domain=ML, inputs=["X"], outputs=["Y", "Z"],
    attrs={**_SVM,
           "classlabels_ints": Attr("ints"),
           "classlabels_strings": Attr("strings"),
           "prob_a": Attr("floats"),
           "prob_b": Attr("floats"),
           "vectors_per_class": Attr("ints")})
def _svm_classifier(ctx):
    return _classifier_outputs(ctx, "classlabels_strings", None)


@op("SVMRegressor", domain=ML, inputs=["X"], outputs=["Y"],
    attrs={**_SVM, "n_supports": Attr("int", 0), "one_class": Attr("int", 0)})
def _svm_regressor(ctx):
    return [TensorType(FLOAT, (_rows(ctx), 1))]


@op("Scaler", domain=ML, inputs=["X"], outputs=["Y"], attrs={"offset": Attr("floats"), "scale": Attr("floats")})
def _scaler(ctx):
    return [TensorType(FLOAT, ctx.input(0).shape)]


@op("Normalizer", domain=ML, inputs=["X"], outputs=["Y"], attrs={"norm": Attr("string", "MAX")})
def _normalizer(ctx):
    return [TensorType(FLOAT, ctx.input(0).shape)]


op("Binarizer", domain=ML, inputs=["X"], outputs=["Y"], attrs={"threshold": Attr("float", 0.0)})(same_as_input())


@op("Imputer", domain=ML, inputs=["X"], outputs=["Y"],
    attrs={"imputed_value_floats": Attr("floats"),
           "imputed_value_int64s": Attr("ints"),
           "replaced_value_float": Attr("float", 0.0),
           "replaced_value_int64": Attr("int", 0)})
def _imputer(ctx):
    return [ctx.input(0)]


@op("ArrayFeatureExtractor", domain=ML, inputs=["X", "Y"], outputs=["Z"])
def _array_feature_extractor(ctx):
    x, indices = ctx.input(0), ctx.input(1)
    if x.shape is None or indices.shape is None:
        return [TensorType(x.dtype, None)]
    count = int(np.prod(indices.shape)) if None not in indices.shape else None
    return [TensorType(x.dtype, (*x.shape[:-1], count) if len(x.shape) > 1 else (1, count))]


@op("LabelEncoder", domain=ML, inputs=["X"], outputs=["Y"],
    attrs={"classes_strings": Attr("strings"),
           "default_float": Attr("float", -0.0),
           "default_int64": Attr("int", -1),
           "default_string": Attr("string", "_Unused"),
           "default_tensor": Attr("tensor"),
           "keys_floats": Attr("floats"),
           "keys_int64s": Attr("ints"),
           "keys_strings": Attr("strings"),
           "keys_tensor": Attr("tensor"),
           "values_floats": Attr("floats"),
           "values_int64s": Attr("ints"),
           "values_strings": Attr("strings"),
           "values_tensor": Attr("tensor")})
def _label_encoder(ctx):
    a, x = ctx.attrs, ctx.input(0)
    if a.get("classes_strings") and not (a.get("keys_strings") or a.get("keys_int64s") or a.get("keys_floats")):
        dtype = None if x.dtype is None else (INT64 if x.dtype == STRING else STRING)  # opset 1
    elif a.get("values_tensor") is not None:
        dtype = a["values_tensor"].dtype
    elif a.get("values_strings"):
        dtype = STRING
    elif a.get("values_int64s"):
        dtype = INT64
    elif a.get("values_floats"):
        dtype = FLOAT
    else:
        dtype = None
    return [TensorType(dtype, x.shape)]


@op("OneHotEncoder", domain=ML, inputs=["X"], outputs=["Y"],
    attrs={"cats_int64s": Attr("ints"), "cats_strings": Attr("strings"), "zeros": Attr("int", 1)})
def _one_hot_encoder(ctx):
    shape = ctx.input(0).shape
    count = len(ctx.attrs.get("cats_int64s") or ctx.attrs.get("cats_strings") or ())
    return [TensorType(np.dtype(np.float32), None if shape is None else (*shape, count))]


@op("CategoryMapper", domain=ML, inputs=["X"], outputs=["Y"],
    attrs={"cats_int64s": Attr("ints"), "cats_strings": Attr("strings"),
           "default_int64": Attr("int", -1), "default_string": Attr("string", "_Unused")})
def _category_mapper(ctx):
    x = ctx.input(0)
    dtype = None if x.dtype is None else (INT64 if x.dtype == STRING else STRING)
    return [TensorType(dtype, x.shape)]


@op("FeatureVectorizer", domain=ML, inputs=["X+"], outputs=["Y"], attrs={"inputdimensions": Attr("ints")})
def _feature_vectorizer(ctx):
    dims = ctx.attrs.get("inputdimensions") or ()
    return [TensorType(FLOAT, (_rows(ctx), sum(dims) if dims else None))]


@op("ZipMap", domain=ML, inputs=["X"], outputs=["Z"],
    attrs={"classlabels_int64s": Attr("ints"), "classlabels_strings": Attr("strings")},
    doc="One {label: probability} map per row of X, as a list of dicts (the runtime's sequences are lists).")
def _zip_map(ctx):
    return [TensorType(None, None)]
