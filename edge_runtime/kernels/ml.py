"""Kernels of the ``ai.onnx.ml`` ops: tree ensembles, linear and SVM models, preprocessing, ZipMap.

onnxruntime is the reference users compare against, so where the ONNX text leaves a case open
(a binary classifier given one class's weights, PROBIT's inverse error function, how an SVM picks
its label) these follow what onnxruntime computes. Scores are computed in float32, as there.

Attribute lists become arrays once per node (``prepared_attributes``), not once per call.
"""

from __future__ import annotations

import math

import numpy as np

from edge_runtime.kernels import tree_walk
from edge_runtime.kernels.prepared_attributes import prepared
from edge_runtime.kernels.registry import kernel
from schemas.registry import UnsupportedOpError

ML = "ai.onnx.ml"


# ------------------------------------------------------------------------------ post transforms


def _logistic(s: np.ndarray) -> np.ndarray:
    v = 1.0 / (1.0 + np.exp(-np.abs(s)))
    return np.where(s < 0, 1.0 - v, v)


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_zero(s: np.ndarray) -> np.ndarray:
    """Softmax that leaves exact zeros (|s| <= 1e-7) out of the sum, as onnxruntime does."""
    top = s.max(axis=-1, keepdims=True)
    nonzero = np.abs(s) > 1e-7
    e = np.where(nonzero, np.exp(s - top), s * np.exp(-top))
    total = np.where(nonzero, e, 0).sum(axis=-1, keepdims=True)
    return e / total


def _erf_inv(x: np.ndarray) -> np.ndarray:
    """onnxruntime's inverse error function (Winitzki's approximation, a = 0.147), not scipy's exact one."""
    sign = np.where(x < 0, -1.0, 1.0).astype(x.dtype)
    log = np.log((1 - x) * (1 + x))
    v = 2 / (np.float32(math.pi) * np.float32(0.147)) + np.float32(0.5) * log
    return sign * np.sqrt(-v + np.sqrt(v * v - log / np.float32(0.147)))


def _probit(s: np.ndarray) -> np.ndarray:
    return np.float32(math.sqrt(2)) * _erf_inv(2 * s - 1)


POST_TRANSFORMS = {
    "NONE": lambda s: s,
    "LOGISTIC": _logistic,
    "SOFTMAX": _softmax,
    "SOFTMAX_ZERO": _softmax_zero,
    "PROBIT": _probit,
}
# TreeEnsemble (opset 5) numbers them
POST_TRANSFORM_CODES = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


def _post_transform(name: str, op: str):
    try:
        return POST_TRANSFORMS[name]
    except KeyError:
        raise UnsupportedOpError(f"{op}: post_transform must be one of {sorted(POST_TRANSFORMS)}, got {name!r}") from None


def _rows(x: np.ndarray, op: str) -> np.ndarray:
    """X as (rows, features): a 1-D X is one row."""
    if x.ndim == 1:
        return x[None, :]
    if x.ndim != 2:
        raise ValueError(f"{op}: X must be [N, C] or [C], got shape {list(x.shape)}")
    return x


def _strings(values) -> np.ndarray:
    """An object array of Python str (np.array would make a fixed-width unicode array)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _labels(ints, strings) -> np.ndarray:
    return _strings(strings) if strings else np.asarray(ints or [], dtype=np.int64)


# ------------------------------------------------------------------------------ tree ensembles


def _check_lengths(a: dict, names, n: int, what: str) -> None:
    for name in names:
        value = a.get(name)
        if value is not None and len(value) not in (0, n):
            raise ValueError(f"{what}: {name} has {len(value)} entries, but there are {n} nodes")


def _tensor_or_list(a: dict, name: str) -> np.ndarray | None:
    """``name`` from its ``*_as_tensor`` form (opset 3, double precision) or its float list."""
    tensor = a.get(f"{name}_as_tensor")
    if tensor is not None:
        return np.asarray(tensor).reshape(-1)
    value = a.get(name)
    return None if value is None else np.asarray(value, dtype=np.float32)


def _listed_nodes(a: dict, op: str) -> tuple[tree_walk.NodeTable, dict]:
    """The nodes of TreeEnsembleClassifier/Regressor (opsets 1-3): parallel lists keyed by (tree, node) ids."""
    treeids, nodeids = a["nodes_treeids"] or [], a["nodes_nodeids"] or []
    index = tree_walk.node_ids(treeids, nodeids, op)
    n = len(treeids)
    _check_lengths(a, ("nodes_modes", "nodes_featureids", "nodes_truenodeids", "nodes_falsenodeids",
                       "nodes_missing_value_tracks_true", "nodes_hitrates"), n, op)
    if n == 0:
        raise ValueError(f"{op}: the ensemble has no nodes (nodes_treeids is empty)")
    describe = [f"{op} tree {t} node {i}" for t, i in zip(treeids, nodeids)]
    modes = a["nodes_modes"] or []
    try:
        mode = np.asarray([tree_walk.MODE_NAMES[m] for m in modes], dtype=np.uint8)
    except KeyError as exc:
        raise ValueError(f"{op}: nodes_modes has {exc.args[0]!r}; expected one of {sorted(tree_walk.MODE_NAMES)}") from None
    if len(mode) != n:
        raise ValueError(f"{op}: nodes_modes has {len(mode)} entries, but there are {n} nodes")
    threshold = _tensor_or_list(a, "nodes_values")
    if threshold is None or len(threshold) != n:
        raise ValueError(f"{op}: nodes_values has {0 if threshold is None else len(threshold)} entries, "
                         f"but there are {n} nodes")

    def children(name: str) -> np.ndarray:
        ids = a[name] or [0] * n
        out = np.full(n, -1, dtype=np.int64)
        for i in np.flatnonzero(mode != tree_walk.LEAF):
            target = index.get((treeids[i], ids[i]))
            if target is None:
                raise ValueError(f"{describe[i]}: {name} points to node id {ids[i]}, which tree {treeids[i]} does not have")
            out[i] = target
        return out

    missing = a["nodes_missing_value_tracks_true"] or [0] * n
    _, first = np.unique(np.asarray(treeids), return_index=True)
    table = tree_walk.NodeTable(
        feature=np.asarray(a["nodes_featureids"] or [0] * n, dtype=np.int64), threshold=threshold, mode=mode,
        true_child=children("nodes_truenodeids"), false_child=children("nodes_falsenodeids"),
        missing_true=np.asarray(missing, dtype=bool), roots=np.sort(first).astype(np.int64), describe=describe)
    return table, index


def _listed_weights(a: dict, index: dict, prefix: str, ids_name: str, op: str):
    """The leaf weights of the older ops: ``<prefix>_treeids/_nodeids``, ``ids_name`` and ``<prefix>_weights``."""
    treeids, nodeids, ids = a[f"{prefix}_treeids"] or [], a[f"{prefix}_nodeids"] or [], a[ids_name] or []
    values = _tensor_or_list(a, f"{prefix}_weights")
    values = np.zeros(0) if values is None else values
    if not len(treeids) == len(nodeids) == len(ids) == len(values):
        raise ValueError(f"{op}: {prefix}_treeids, {prefix}_nodeids, {ids_name} and {prefix}_weights must have one "
                         f"entry per weight, got {len(treeids)}, {len(nodeids)}, {len(ids)} and {len(values)}")
    nodes = np.empty(len(treeids), dtype=np.int64)
    for k, key in enumerate(zip(treeids, nodeids)):
        node = index.get(key)
        if node is None:
            raise ValueError(f"{op}: weight {k} ({prefix}_treeids/{prefix}_nodeids) is for tree {key[0]} node {key[1]}, "
                             "which the ensemble does not have")
        nodes[k] = node
    return nodes, np.asarray(ids, dtype=np.int64), values


def _base_values(a: dict) -> np.ndarray:
    base = _tensor_or_list(a, "base_values")
    return np.zeros(0, np.float32) if base is None else base


def _forest_classifier(a: dict):
    op = "TreeEnsembleClassifier"
    labels = _labels(a["classlabels_int64s"], a["classlabels_strings"])
    if len(labels) < 2:
        raise ValueError(f"{op}: needs at least 2 class labels (classlabels_int64s or classlabels_strings), "
                         f"got {len(labels)}")
    table, index = _listed_nodes(a, op)
    nodes, classes, weights = _listed_weights(a, index, "class", "class_ids", op)
    forest = tree_walk.build_forest(table, nodes, classes, weights, len(labels), "SUM")
    binary = len(labels) == 2 and len(set(classes.tolist())) == 1
    return forest, labels, binary, bool((weights >= 0).all())


@kernel("TreeEnsembleClassifier", domain=ML)
def tree_ensemble_classifier(x, *, xp, **a):
    forest, labels, binary, all_positive = prepared(
        "TreeEnsembleClassifier", list(a.values()), lambda: _forest_classifier(a))
    transform = _post_transform(a["post_transform"], "TreeEnsembleClassifier")
    scores, scored = forest.aggregate(forest.leaves(_rows(x, "TreeEnsembleClassifier")), "SUM")
    label, probabilities = _classify(scores, scored, _base_values(a), transform, a["post_transform"], binary, all_positive)
    return labels[label], probabilities.astype(np.float32)


def _classify(scores, scored, base, transform, transform_name, binary, all_positive):
    """onnxruntime's reading of a tree classifier's scores: (label index, probabilities) per row."""
    n_classes = scores.shape[1]
    if n_classes > 2:
        k = min(len(base), n_classes)
        scores[:, :k] += base[:k]
        scored[:, :k] = True
        label = np.argmax(np.where(scored, scores, -np.inf), axis=1)
        return label, transform(np.where(scored, scores, 0.0).astype(np.float32))
    s0, s1, h0, h1 = scores[:, 0], scores[:, 1], scored[:, 0], scored[:, 1].copy()
    if len(base) == 2:
        # onnxruntime: a row where class 1 scored gets base[1] + the class 0 score, mirrored into class 0
        s1 = np.where(h1, base[1] + s0, s1 + base[1])
        s0 = np.where(h1, -s1, s0 + base[0])
        single = np.zeros(len(s0), bool)
    else:
        if len(base) == 1:
            s0 = s0 + base[0]
        single = ~h1
    positive = np.where(h1, s1, np.where(h0, s0, 0.0))
    cut = 0.5 if binary and all_positive else 0.0
    label = (positive > cut).astype(np.int64)
    pair = np.stack([np.where(h0, s0, 0.0), np.where(h1, s1, 0.0)], axis=1).astype(np.float32)
    out = transform(pair)
    if single.any():
        out[single] = _one_score(s0[single].astype(np.float32), transform, transform_name, binary, all_positive,
                                 no_base=len(base) == 0)
    return label, out


def _one_score(s, transform, transform_name, binary, all_positive, no_base):
    """Both class columns from the one score a binary tree classifier keeps, as onnxruntime writes them:
    (1 - p, p) for probabilities (positive weights, or after LOGISTIC), (-s, s) for signed scores."""
    if transform_name == "PROBIT":
        return np.stack([_probit(s), np.zeros_like(s)], axis=1)
    if transform_name == "LOGISTIC":
        s = _logistic(s)
    if (binary and all_positive) or transform_name == "LOGISTIC":
        return np.stack([1 - s, s], axis=1)
    if binary or no_base:
        return np.stack([-s, s], axis=1)
    return np.stack([s, np.zeros_like(s)], axis=1)


def _forest_regressor(a: dict):
    op = "TreeEnsembleRegressor"
    table, index = _listed_nodes(a, op)
    nodes, targets, weights = _listed_weights(a, index, "target", "target_ids", op)
    n_targets = a["n_targets"] if a["n_targets"] is not None else int(targets.max(initial=0)) + 1
    return tree_walk.build_forest(table, nodes, targets, weights, n_targets, a["aggregate_function"])


def _regress(forest, x, how: str, base: np.ndarray, transform_name: str, op: str) -> np.ndarray:
    scores, _ = forest.aggregate(forest.leaves(_rows(x, op)), how)
    n_targets = scores.shape[1]
    if len(base) == n_targets:  # onnxruntime ignores base values of any other length
        scores = scores + base
    scores = scores.astype(np.float32)
    if n_targets == 1:  # onnxruntime applies only PROBIT to a single target
        return _probit(scores) if transform_name == "PROBIT" else scores
    return _post_transform(transform_name, op)(scores)


@kernel("TreeEnsembleRegressor", domain=ML)
def tree_ensemble_regressor(x, *, xp, **a):
    forest = prepared("TreeEnsembleRegressor", list(a.values()), lambda: _forest_regressor(a))
    _post_transform(a["post_transform"], "TreeEnsembleRegressor")
    return _regress(forest, x, a["aggregate_function"], _base_values(a), a["post_transform"], "TreeEnsembleRegressor")


def _forest_v5(a: dict):
    op = "TreeEnsemble"
    n = len(a["nodes_featureids"])
    _check_lengths(a, ("nodes_truenodeids", "nodes_falsenodeids", "nodes_trueleafs", "nodes_falseleafs",
                       "nodes_missing_value_tracks_true"), n, op)
    splits, modes = np.asarray(a["nodes_splits"]).reshape(-1), np.asarray(a["nodes_modes"]).reshape(-1)
    if len(splits) != n or len(modes) != n:
        raise ValueError(f"{op}: nodes_splits has {len(splits)} and nodes_modes {len(modes)} entries, "
                         f"but there are {n} nodes")
    bad_mode = np.flatnonzero(modes > tree_walk.MEMBER)
    if bad_mode.size:
        raise ValueError(f"{op} node {bad_mode[0]}: nodes_modes is {int(modes[bad_mode[0]])}; expected 0..6")
    weights = np.asarray(a["leaf_weights"]).reshape(-1)
    targets = np.asarray(a["leaf_targetids"], dtype=np.int64)
    if len(weights) != len(targets):
        raise ValueError(f"{op}: leaf_weights has {len(weights)} entries but leaf_targetids {len(targets)}")
    n_leaves = len(weights)
    describe = [f"{op} node {i}" for i in range(n)] + [f"{op} leaf {j}" for j in range(n_leaves)]

    def children(ids_name: str, leafs_name: str) -> np.ndarray:
        ids = np.asarray(a[ids_name], dtype=np.int64)
        is_leaf = np.asarray(a[leafs_name], dtype=bool)
        bound = np.where(is_leaf, n_leaves, n)
        bad = np.flatnonzero((ids < 0) | (ids >= bound))
        if bad.size:
            i = int(bad[0])
            kind = "leaf" if is_leaf[i] else "node"
            raise ValueError(f"{op} node {i}: {ids_name} points to {kind} {int(ids[i])}, but there are "
                             f"{int(bound[i])} {kind}s")
        return np.where(is_leaf, n + ids, ids)

    roots = np.asarray(a["tree_roots"], dtype=np.int64)
    bad_root = np.flatnonzero((roots < 0) | (roots >= n))
    if bad_root.size:
        raise ValueError(f"{op}: tree_roots[{bad_root[0]}] is {int(roots[bad_root[0]])}, but there are {n} nodes")
    true_child, false_child = children("nodes_truenodeids", "nodes_trueleafs"), children("nodes_falsenodeids", "nodes_falseleafs")
    # A tree that is one leaf: its root's two branches are the same leaf.
    lone = (true_child[roots] == false_child[roots]) & (true_child[roots] >= n)
    roots = np.where(lone, true_child[roots], roots)
    mode = np.concatenate([modes.astype(np.uint8), np.full(n_leaves, tree_walk.LEAF, np.uint8)])
    missing = np.asarray(a["nodes_missing_value_tracks_true"] or [0] * n, dtype=bool)
    table = tree_walk.NodeTable(
        feature=np.concatenate([np.asarray(a["nodes_featureids"], np.int64), np.zeros(n_leaves, np.int64)]),
        threshold=np.concatenate([splits, np.zeros(n_leaves, splits.dtype)]), mode=mode,
        true_child=np.concatenate([true_child, np.full(n_leaves, -1)]),
        false_child=np.concatenate([false_child, np.full(n_leaves, -1)]),
        missing_true=np.concatenate([missing, np.zeros(n_leaves, bool)]), roots=roots, describe=describe,
        members=_membership_sets(a["membership_values"], modes, op))
    n_targets = a["n_targets"] if a["n_targets"] is not None else int(targets.max(initial=0)) + 1
    how = a["aggregate_function"]
    if not 0 <= how < len(tree_walk.AGGREGATES):
        raise ValueError(f"{op}: aggregate_function is {how}; expected 0..3 (AVERAGE, SUM, MIN, MAX)")
    forest = tree_walk.build_forest(table, np.arange(n, n + n_leaves), targets, weights, n_targets,
                                    tree_walk.AGGREGATES[how])
    return forest, weights.dtype


def _membership_sets(values, modes: np.ndarray, op: str) -> list[np.ndarray] | None:
    """Each set-membership node's members, in node order: ``membership_values`` lists them NaN-separated."""
    count = int((modes == tree_walk.MEMBER).sum())
    if not count:
        return None
    if values is None:
        raise ValueError(f"{op}: {count} nodes test set membership but membership_values is not given")
    values = np.asarray(values).reshape(-1)
    cuts = np.flatnonzero(np.isnan(values))
    if len(cuts) != count:
        raise ValueError(f"{op}: membership_values holds {len(cuts)} NaN-terminated sets for {count} set-membership nodes")
    return [members[:-1] for members in np.split(values, cuts + 1)[:count]]


@kernel("TreeEnsemble", domain=ML)
def tree_ensemble(x, *, xp, **a):
    forest, dtype = prepared("TreeEnsemble", list(a.values()), lambda: _forest_v5(a))
    code = a["post_transform"]
    if not 0 <= code < len(POST_TRANSFORM_CODES):
        raise ValueError(f"TreeEnsemble: post_transform is {code}; expected 0..4")
    how = tree_walk.AGGREGATES[a["aggregate_function"]]
    y = _regress(forest, x, how, np.zeros(0), POST_TRANSFORM_CODES[code], "TreeEnsemble")
    return y.astype(x.dtype if x.dtype.kind == "f" else dtype)


# ------------------------------------------------------------------------------ linear models


def _coefficients(coefficients, columns: int, op: str) -> np.ndarray:
    coef = np.asarray(coefficients or [], dtype=np.float32)
    if columns == 0 or coef.size % columns:
        raise ValueError(f"{op}: coefficients has {coef.size} values, not a multiple of X's {columns} columns")
    return coef.reshape(-1, columns)


def _intercepts(intercepts, n: int, op: str) -> np.ndarray:
    values = np.asarray(intercepts or [0.0], dtype=np.float32)
    if len(values) not in (1, n):
        raise ValueError(f"{op}: intercepts has {len(values)} values for {n} outputs")
    return values


@kernel("LinearClassifier", domain=ML)
def linear_classifier(x, *, xp, coefficients, intercepts, classlabels_ints, classlabels_strings, multi_class,
                      post_transform):
    op = "LinearClassifier"
    x = _rows(x, op).astype(np.float32, copy=False)
    transform = _post_transform(post_transform, op)
    labels = _labels(classlabels_ints, classlabels_strings)
    coef = prepared(op, [coefficients, x.shape[1]], lambda: _coefficients(coefficients, x.shape[1], op))
    scores = x @ coef.T + _intercepts(intercepts, len(coef), op)
    if len(coef) == 1 and len(labels) == 2:  # one score for two classes: (1 - p, p), as onnxruntime writes it
        p = transform(scores)
        return labels[(scores[:, 0] > 0).astype(np.int64)], np.concatenate([1 - p, p], axis=1)
    if len(labels) and len(labels) != len(coef):
        raise ValueError(f"{op}: {len(labels)} class labels for {len(coef)} rows of coefficients")
    scores = transform(scores)
    if scores.shape[1] == 1:  # one score, at most one label: that label where it is positive
        cut = 0 if post_transform == "NONE" else 0.5
        positive = scores[:, 0] >= cut
        if not len(labels):
            return positive.astype(np.int64), scores
        return np.where(positive, labels[0], "" if labels.dtype == object else 0).astype(labels.dtype), scores
    winner = np.argmax(scores, axis=1)
    return (labels[winner] if len(labels) else winner), scores


@kernel("LinearRegressor", domain=ML)
def linear_regressor(x, *, xp, coefficients, intercepts, targets, post_transform):
    op = "LinearRegressor"
    x = _rows(x, op).astype(np.float32, copy=False)
    coef = prepared(op, [coefficients, x.shape[1]], lambda: _coefficients(coefficients, x.shape[1], op))
    if len(coef) != targets:
        raise ValueError(f"{op}: coefficients give {len(coef)} targets, but targets is {targets}")
    return _post_transform(post_transform, op)(x @ coef.T + _intercepts(intercepts, targets, op))


# ------------------------------------------------------------------------------ support vector machines


def _kernel_matrix(x: np.ndarray, vectors: np.ndarray, kind: str, params) -> np.ndarray:
    """(rows, vectors) kernel values between the rows of ``x`` and the support vectors."""
    gamma, coef0, degree = (list(params or []) + [0.0, 0.0, 0.0])[:3]
    if kind == "RBF":
        squared = ((x * x).sum(1)[:, None] + (vectors * vectors).sum(1)[None, :] - 2 * (x @ vectors.T))
        return np.exp(-gamma * np.maximum(squared, 0))
    dot = x @ vectors.T
    if kind == "LINEAR":
        return dot
    if kind == "POLY":
        return (gamma * dot + coef0) ** int(degree)
    if kind == "SIGMOID":
        return np.tanh(gamma * dot + coef0)
    raise UnsupportedOpError(f"SVM: kernel_type must be LINEAR, POLY, RBF or SIGMOID, got {kind!r}")


def _support_vectors(support_vectors, count: int, columns: int, op: str) -> np.ndarray:
    sv = np.asarray(support_vectors or [], dtype=np.float64)
    if sv.size != count * columns:
        raise ValueError(f"{op}: support_vectors has {sv.size} values, expected {count} vectors x {columns} columns")
    return sv.reshape(count, columns)


def _pairwise_probability(decision: np.ndarray, prob_a: np.ndarray, prob_b: np.ndarray, pairs: "_Pairs") -> np.ndarray:
    """libsvm's multiclass probabilities from the one-vs-one decisions (Wu, Lin and Weng 2004), in
    float32 and with onnxruntime's stopping rule, vectorised over the rows."""
    rows, n = decision.shape[0], pairs.n_classes
    value = np.clip(1 - _logistic(decision * prob_a + prob_b), 1e-7, 1 - 1e-7).astype(np.float32)
    r = np.zeros((rows, n, n), np.float32)
    r[:, pairs.first, pairs.second], r[:, pairs.second, pairs.first] = value, 1 - value
    q = -r * r.transpose(0, 2, 1)
    q[:, np.arange(n), np.arange(n)] = (r * r).sum(axis=1)
    diagonal = q[:, np.arange(n), np.arange(n)]
    p = np.full((rows, n), 1 / n, np.float32)
    eps = np.float32(0.005 / n)
    active = np.ones(rows, bool)
    for _ in range(max(100, n)):
        qp = np.einsum("rij,rj->ri", q, p)
        pqp = (p * qp).sum(1)
        active &= np.abs(qp - pqp[:, None]).max(1) >= eps
        if not active.any():
            break
        for t in range(n):  # Gauss-Seidel: each class's update sees the previous ones'
            diff = np.where(active, (pqp - qp[:, t]) / diagonal[:, t], 0).astype(np.float32)
            p[:, t] += diff
            scale = 1 + diff
            pqp = (pqp + diff * (diff * diagonal[:, t] + 2 * qp[:, t])) / scale / scale
            qp = (qp + diff[:, None] * q[:, t, :]) / scale[:, None]
            p /= scale[:, None]
    return p


class _Pairs:
    """The one-vs-one layout of an SVM: class pairs (i < j) in libsvm's order, and the (vectors,
    pairs) matrix whose product with the kernel values gives every pair's decision at once."""

    def __init__(self, coef: np.ndarray, starts: np.ndarray, n_classes: int):
        self.n_classes = n_classes
        self.first, self.second = (np.asarray(v, np.int64) for v in zip(*[
            (i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]))
        self.weights = np.zeros((coef.shape[1], len(self.first)))
        for pair, (i, j) in enumerate(zip(self.first, self.second)):
            si, sj = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
            self.weights[si, pair] = coef[j - 1, si]
            self.weights[sj, pair] = coef[i, sj]


def _svm_model(a: dict, columns: int, n_classes: int, op: str):
    per_class = list(a["vectors_per_class"] or [])
    count = sum(per_class)
    if count == 0:
        return None, None, _coefficients(a["coefficients"], columns, op)
    if len(per_class) != n_classes:
        raise ValueError(f"{op}: vectors_per_class has {len(per_class)} entries for {n_classes} class labels")
    coef = np.asarray(a["coefficients"] or [], dtype=np.float64)
    if coef.size != (n_classes - 1) * count:
        raise ValueError(f"{op}: coefficients has {coef.size} values, expected (classes - 1) x vectors = "
                         f"{(n_classes - 1) * count}")
    pairs = n_classes * (n_classes - 1) // 2
    if len(a["rho"] or []) != pairs:
        raise ValueError(f"{op}: rho has {len(a['rho'] or [])} values, expected one per class pair ({pairs})")
    if a["prob_a"] and (len(a["prob_a"]) != pairs or len(a["prob_b"] or []) != pairs):
        raise ValueError(f"{op}: prob_a and prob_b need one value per class pair ({pairs})")
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(np.int64)
    vectors = _support_vectors(a["support_vectors"], count, columns, op)
    return vectors, _Pairs(coef.reshape(n_classes - 1, count), starts, n_classes), None


@kernel("SVMClassifier", domain=ML)
def svm_classifier(x, *, xp, **a):
    op = "SVMClassifier"
    x = _rows(x, op).astype(np.float32, copy=False)
    labels = _labels(a["classlabels_ints"], a["classlabels_strings"])
    n_classes = max(len(labels), 1)
    vectors, pairs, coef = prepared(op, [*a.values(), x.shape[1]], lambda: _svm_model(a, x.shape[1], n_classes, op))
    rho = np.asarray(a["rho"] or [0.0], dtype=np.float64)
    transform = _post_transform(a["post_transform"], op)
    if vectors is None:  # a linear SVM: one score per class
        scores = (x @ coef.T + np.float32(rho[0])).astype(np.float32)
        winner = np.argmax(scores, axis=1)
        if len(rho) == 1 and len(labels) != 2:
            winner = (scores[np.arange(len(x)), winner] > 0).astype(np.int64)
            return (labels[winner] if len(labels) > 1 else winner), transform(scores)
        return (labels[winner] if len(labels) else winner), transform(scores)
    decision = _kernel_matrix(x.astype(np.float64), vectors, a["kernel_type"], a["kernel_params"]) @ pairs.weights + rho
    won = decision > 0
    votes = np.zeros((len(x), n_classes), np.int64)
    for pair_side, winners in ((pairs.first, won), (pairs.second, ~won)):
        np.add.at(votes, (slice(None), pair_side), winners.astype(np.int64))
    winner = np.argmax(votes, axis=1)
    decision = decision.astype(np.float32)
    if a["prob_a"]:
        prob_a, prob_b = (np.asarray(a[k], np.float32) for k in ("prob_a", "prob_b"))
        return labels[winner], _pairwise_probability(decision, prob_a, prob_b, pairs)
    if decision.shape[1] == 1:  # two classes: one decision, written as (-s, s)
        return labels[winner], np.concatenate([-decision, decision], axis=1)
    return labels[winner], transform(decision)


@kernel("SVMRegressor", domain=ML)
def svm_regressor(x, *, xp, coefficients, kernel_params, kernel_type, post_transform, rho, support_vectors,
                  n_supports, one_class):
    op = "SVMRegressor"
    x = _rows(x, op).astype(np.float64)
    coef = np.asarray(coefficients or [], dtype=np.float64)
    if n_supports > 0:
        vectors = prepared(op, [support_vectors, n_supports, x.shape[1]],
                           lambda: _support_vectors(support_vectors, n_supports, x.shape[1], op))
        if len(coef) != n_supports:
            raise ValueError(f"{op}: coefficients has {len(coef)} values for {n_supports} support vectors")
        score = _kernel_matrix(x, vectors, kernel_type, kernel_params) @ coef
    else:
        if len(coef) != x.shape[1]:
            raise ValueError(f"{op}: coefficients has {len(coef)} values for X's {x.shape[1]} columns")
        score = x @ coef
    score = score + (rho or [0.0])[0]
    if one_class:
        score = np.where(score > 0, 1.0, -1.0)
    return score.astype(np.float32)[:, None]


# ------------------------------------------------------------------------------ preprocessing


def _per_column(values, columns: int, what: str, op: str) -> np.ndarray:
    array = np.asarray(values if values is not None and len(values) else [0.0], dtype=np.float32)
    if len(array) not in (1, columns):
        raise ValueError(f"{op}: {what} has {len(array)} values; X has {columns} columns (give 1 or {columns})")
    return array


@kernel("Scaler", domain=ML)
def scaler(x, *, xp, offset, scale):
    x = x.astype(np.float32, copy=False)
    columns = x.shape[-1] if x.ndim else 1
    shift = _per_column(offset, columns, "offset", "Scaler")
    factor = _per_column(scale or [1.0], columns, "scale", "Scaler")
    return (x - shift) * factor


_NORMS = {
    "MAX": lambda x: x.max(axis=-1, keepdims=True),
    "L1": lambda x: np.abs(x).sum(axis=-1, keepdims=True),
    "L2": lambda x: np.sqrt((x * x).sum(axis=-1, keepdims=True)),
}


@kernel("Normalizer", domain=ML)
def normalizer(x, *, xp, norm):
    if norm not in _NORMS:
        raise UnsupportedOpError(f"Normalizer: norm must be one of {sorted(_NORMS)}, got {norm!r}")
    x = x.astype(np.float32, copy=False)
    with np.errstate(divide="ignore", invalid="ignore"):  # an all-zero row divides by zero, as in onnxruntime
        return x / _NORMS[norm](x)


@kernel("Binarizer", domain=ML)
def binarizer(x, *, xp, threshold):
    return np.where(x > threshold, 1, 0).astype(x.dtype)


@kernel("Imputer", domain=ML)
def imputer(x, *, xp, imputed_value_floats, imputed_value_int64s, replaced_value_float, replaced_value_int64):
    columns = x.shape[-1] if x.ndim else 1
    if x.dtype.kind == "f":
        fill = _per_column(imputed_value_floats, columns, "imputed_value_floats", "Imputer")
        hole = np.isnan(x) if math.isnan(replaced_value_float) else x == replaced_value_float
    else:
        fill = np.asarray(imputed_value_int64s or [0], dtype=np.int64)
        if len(fill) not in (1, columns):
            raise ValueError(f"Imputer: imputed_value_int64s has {len(fill)} values; X has {columns} columns")
        hole = x == replaced_value_int64
    return np.where(hole, np.broadcast_to(fill, x.shape), x).astype(x.dtype)


@kernel("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(x, indices, *, xp):
    flat = np.asarray(indices, dtype=np.int64).reshape(-1)
    columns = x.shape[-1]
    bad = flat[(flat < 0) | (flat >= columns)]
    if bad.size:
        raise ValueError(f"ArrayFeatureExtractor: index {int(bad[0])} (input Y) is out of range for X's last "
                         f"dimension of {columns}")
    picked = np.take(x, flat, axis=-1)
    return picked[None, :] if x.ndim == 1 else picked


def _label_encoder_table(a: dict, strings_in: bool):
    """(keys, values, default) of a LabelEncoder: its keys_*/values_* pairs (opset 2-4), or opset 1's
    classes_strings, which maps a string to its position and a position back to its string."""
    classes = a["classes_strings"]
    if classes and not any(a[k] is not None and len(a[k]) for k in ("keys_strings", "keys_int64s", "keys_floats")):
        positions = list(range(len(classes)))
        if strings_in:
            return list(classes), np.asarray(positions, np.int64), a["default_int64"]
        return positions, _strings(classes), a["default_string"]
    keys = next((v for v in (a["keys_tensor"], a["keys_strings"], a["keys_int64s"], a["keys_floats"]) if v is not None
                 and len(v)), None)
    values = next((v for v in (a["values_tensor"], a["values_strings"], a["values_int64s"], a["values_floats"])
                   if v is not None and len(v)), None)
    if keys is None or values is None:
        raise ValueError("LabelEncoder: needs keys (keys_*) and values (values_*), or classes_strings")
    if len(keys) != len(values):
        raise ValueError(f"LabelEncoder: {len(keys)} keys but {len(values)} values")
    if a["values_tensor"] is not None:
        out_dtype = a["values_tensor"].dtype
    elif a["values_strings"]:
        out_dtype = np.dtype(object)
    elif a["values_int64s"]:
        out_dtype = np.dtype(np.int64)
    else:
        out_dtype = np.dtype(np.float32)
    if a["default_tensor"] is not None:
        default = np.asarray(a["default_tensor"]).reshape(-1)[0]
    else:
        default = {"O": a["default_string"], "i": a["default_int64"]}.get(out_dtype.kind, a["default_float"])
    return np.asarray(keys, dtype=object).reshape(-1).tolist(), np.asarray(values).reshape(-1).astype(out_dtype), default


class _KeyIndex:
    """The position of each element of x among ``keys`` (-1 where absent; the first of equal keys):
    a dict for strings, one sorted search for numbers, where a NaN key matches NaN (LabelEncoder 4)."""

    def __init__(self, keys):
        keys = list(keys)
        self.strings = any(isinstance(k, str) for k in keys)
        if self.strings:
            self.table = {k: i for i, k in reversed(list(enumerate(keys)))}
            return
        numbers = np.asarray(keys, dtype=np.float64)
        self.order = np.argsort(numbers, kind="stable")
        self.sorted = numbers[self.order]
        nan = np.flatnonzero(np.isnan(numbers))
        self.nan_position = int(nan[0]) if nan.size else -1

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.strings or x.dtype == object:
            table = self.table if self.strings else {}
            return np.asarray([table.get(k, -1) for k in x.reshape(-1).tolist()], np.int64).reshape(x.shape)
        numbers = x.astype(np.float64)
        if not len(self.sorted):
            return np.full(x.shape, -1, np.int64)
        at = np.clip(np.searchsorted(self.sorted, numbers), 0, len(self.sorted) - 1)
        position = np.where(self.sorted[at] == numbers, self.order[at], -1)
        return np.where(np.isnan(numbers), self.nan_position, position)


def _look_up(index: _KeyIndex, values: np.ndarray, default, x: np.ndarray) -> np.ndarray:
    """``values[position of x among the keys]``, ``default`` where x is no key."""
    position = index(x)
    found = values.take(np.maximum(position, 0)) if len(values) else np.empty(x.shape, values.dtype)
    fallback = np.empty((), dtype=values.dtype)
    fallback[()] = default
    return np.where(position >= 0, found, fallback).astype(values.dtype)


@kernel("LabelEncoder", domain=ML)
def label_encoder(x, *, xp, **a):
    strings_in = x.dtype == object

    def build():
        keys, values, default = _label_encoder_table(a, strings_in)
        return _KeyIndex(keys), values, default

    index, values, default = prepared("LabelEncoder", [*a.values(), strings_in], build)
    return _look_up(index, values, default, x)


@kernel("OneHotEncoder", domain=ML)
def one_hot_encoder(x, *, xp, cats_int64s, cats_strings, zeros):
    cats = list(cats_strings) if cats_strings else list(cats_int64s or [])
    if not cats:
        raise ValueError("OneHotEncoder: needs cats_int64s or cats_strings")
    index = prepared("OneHotEncoder", [cats_strings, cats_int64s], lambda: _KeyIndex(cats))
    position = index(x if x.dtype == object else x.astype(np.int64)).reshape(-1)
    if not zeros and (position < 0).any():
        value = x.reshape(-1)[int(np.argmax(position < 0))]
        raise ValueError(f"OneHotEncoder: value {value!r} is not a category and zeros=0")
    out = np.zeros((len(position), len(cats)), np.float32)
    hit = position >= 0
    out[np.flatnonzero(hit), position[hit]] = 1
    return out.reshape(*x.shape, len(cats))


@kernel("CategoryMapper", domain=ML)
def category_mapper(x, *, xp, cats_int64s, cats_strings, default_int64, default_string):
    strings, ints = list(cats_strings or []), list(cats_int64s or [])
    if len(strings) != len(ints):
        raise ValueError(f"CategoryMapper: cats_strings has {len(strings)} entries but cats_int64s {len(ints)}")
    strings_in = x.dtype == object
    index = prepared("CategoryMapper", [cats_strings, cats_int64s, strings_in],
                     lambda: _KeyIndex(strings if strings_in else ints))
    if strings_in:
        return _look_up(index, np.asarray(ints, np.int64), default_int64, x)
    return _look_up(index, _strings(strings), default_string, x)


@kernel("FeatureVectorizer", domain=ML)
def feature_vectorizer(*xs, xp, inputdimensions):
    dims = list(inputdimensions or [])
    if dims and len(dims) != len(xs):
        raise ValueError(f"FeatureVectorizer: inputdimensions has {len(dims)} entries for {len(xs)} inputs")
    rows = 1 if xs[0].ndim <= 1 else xs[0].shape[0]
    parts = []
    for i, x in enumerate(xs):
        part = x.astype(np.float32).reshape(rows, -1)
        if dims:  # each input padded with zeros or cut to its declared width
            width = dims[i]
            part = np.pad(part[:, :width], ((0, 0), (0, max(0, width - part.shape[1]))))
        parts.append(part)
    return np.concatenate(parts, axis=1)


@kernel("ZipMap", domain=ML)
def zip_map(x, *, xp, classlabels_int64s, classlabels_strings):
    labels = list(classlabels_strings) if classlabels_strings else list(classlabels_int64s or [])
    if x.ndim != 2 or x.shape[1] != len(labels):
        raise ValueError(f"ZipMap: X must be [N, {len(labels)}] (one column per class label), got shape {list(x.shape)}")
    return [dict(zip(labels, row)) for row in x.tolist()]
