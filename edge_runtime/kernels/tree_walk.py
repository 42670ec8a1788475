"""Tree ensembles as flat node arrays, walked level by level for a whole batch at once.

Every node of every tree gets one global index. A split node holds its feature, threshold, mode
and two children; a leaf is its own two children, so a walk that has reached it stays there. The
walk starts a (rows, trees) array of node indices at the roots and takes one step per level for
all rows and trees together (a few gathers over the node arrays), as many steps as the deepest
tree has levels: no per-row or per-tree Python loop.

Leaf values are a dense (leaf rows, targets) table; each node points at its row (split nodes at an
all-absent row), so aggregation is one gather and one reduction over the trees axis. Which
(leaf, target) pairs carry a weight is kept beside the values, because onnxruntime's aggregation
tells a target no tree scored (it stays 0, and MIN/MAX ignore it) from a score of 0.

Malformed attributes (a child id that names no node, a cycle, a weight for a node that does not
exist, a feature index past X's columns) are ``ValueError``s naming the attribute and the node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

# Node modes, as TreeEnsemble (opset 5) numbers them; LEAF is ours (the older ops spell it out).
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER, LEAF = range(8)
MODE_NAMES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT, "BRANCH_EQ": EQ,
              "BRANCH_NEQ": NEQ, "LEAF": LEAF}
_COMPARE = {LEQ: np.less_equal, LT: np.less, GTE: np.greater_equal, GT: np.greater, EQ: np.equal, NEQ: np.not_equal}
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")  # TreeEnsemble's aggregate_function numbers them in this order


@dataclass(frozen=True)
class Forest:
    feature: np.ndarray  # (nodes,) int64; 0 for leaves
    threshold: np.ndarray  # (nodes,) float32 or float64
    mode: np.ndarray  # (nodes,) uint8
    children: np.ndarray  # (nodes * 2,) int64: [2i] the true child, [2i + 1] the false child
    missing_true: np.ndarray | None  # (nodes,) bool, None when no node sends NaN to its true child
    members: np.ndarray | None  # (member nodes, widest set) padded with NaN; MEMBER nodes' sets
    member_row: np.ndarray | None  # (nodes,) int64: each node's row of ``members``
    roots: np.ndarray  # (trees,) int64
    depth: int  # steps from a root to the deepest leaf
    leaf_row: np.ndarray  # (nodes,) int64 into the weight tables
    weights: np.ndarray  # (leaf rows + 1, targets) float32 or float64; the last row is all absent
    scored: np.ndarray  # (leaf rows + 1, targets) bool: which weights are given
    modes: tuple[int, ...]  # the split modes present
    n_features: int  # one more than the largest feature index a split reads
    describe: tuple[str, ...]  # (nodes,) how messages name each node

    @property
    def n_trees(self) -> int:
        return len(self.roots)

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """The leaf each row of ``x`` (rows, features) reaches in each tree: (rows, trees)."""
        if x.shape[1] < self.n_features:
            node = int(np.argmax(self.feature))
            raise ValueError(f"{self.describe[node]} reads feature {int(self.feature[node])} (nodes_featureids), "
                             f"but X has {x.shape[1]} columns")
        rows = x.shape[0]
        flat = np.ascontiguousarray(x).reshape(-1)
        row_start = (np.arange(rows, dtype=np.int64) * x.shape[1])[:, None]
        node = np.broadcast_to(self.roots, (rows, self.n_trees))
        for _ in range(self.depth):
            value = flat[row_start + self.feature[node]]
            go_false = ~self._goes_true(node, value)
            node = self.children[2 * node + go_false]
        return node

    def _goes_true(self, node: np.ndarray, value: np.ndarray) -> np.ndarray:
        threshold = self.threshold[node]
        if len(self.modes) == 1 and self.modes[0] != MEMBER:
            go = _COMPARE[self.modes[0]](value, threshold)
        else:
            mode = self.mode[node]
            go = np.zeros(node.shape, bool)
            for m in self.modes:
                here = mode == m
                if m == MEMBER:
                    sets = self.members[self.member_row[node[here]]]
                    go[here] = (sets == value[here][:, None]).any(axis=1)
                else:
                    go[here] = _COMPARE[m](value[here], threshold[here])
        if self.missing_true is not None:
            go |= self.missing_true[node] & np.isnan(value)
        return go

    def aggregate(self, leaves: np.ndarray, how: str) -> tuple[np.ndarray, np.ndarray]:
        """Per row and target, the trees' weights combined by ``how``, and whether any tree gave one."""
        rows = self.leaf_row[leaves]  # (rows, trees)
        scored = self.scored[rows].any(axis=1)
        values = self.weights[rows]
        if how in ("SUM", "AVERAGE"):
            total = values.sum(axis=1)
            return (total / self.n_trees if how == "AVERAGE" else total), scored
        absent = np.inf if how == "MIN" else -np.inf
        picked = np.where(self.scored[rows], values, absent)
        combined = picked.min(axis=1) if how == "MIN" else picked.max(axis=1)
        return np.where(scored, combined, 0.0), scored


@dataclass
class NodeTable:
    """The nodes of all trees, by global index, before they become a ``Forest``."""

    feature: np.ndarray
    threshold: np.ndarray
    mode: np.ndarray
    true_child: np.ndarray  # global index; -1 on leaves
    false_child: np.ndarray
    missing_true: np.ndarray
    roots: np.ndarray
    describe: list[str]
    members: list[np.ndarray] | None = None  # per MEMBER node, in node order


def build_forest(table: NodeTable, leaf_nodes: np.ndarray, leaf_targets: np.ndarray, leaf_values: np.ndarray,
                 n_targets: int, how: str) -> Forest:
    """A ``Forest`` from its nodes and its leaf weights: ``leaf_values[k]`` goes to target
    ``leaf_targets[k]`` of node ``leaf_nodes[k]``; several weights on one (leaf, target) are
    combined as ``how`` combines trees."""
    n = len(table.feature)
    if how not in AGGREGATES:
        raise ValueError(f"aggregate_function must be one of {list(AGGREGATES)}, got {how!r}")
    is_leaf = table.mode == LEAF
    index = np.arange(n, dtype=np.int64)
    children = np.stack([np.where(is_leaf, index, table.true_child), np.where(is_leaf, index, table.false_child)], axis=1)
    depth = _depth(children.reshape(-1), is_leaf, table.roots, table.describe)
    feature = np.where(is_leaf, 0, table.feature).astype(np.int64)
    negative = np.flatnonzero(feature < 0)
    if negative.size:
        raise ValueError(f"{table.describe[negative[0]]} has nodes_featureids {int(feature[negative[0]])}; feature indices "
                         "cannot be negative")
    bad_target = np.flatnonzero((leaf_targets < 0) | (leaf_targets >= n_targets))
    if bad_target.size:
        k = int(bad_target[0])
        raise ValueError(f"weight {k} (for {table.describe[leaf_nodes[k]]}) is for target/class {int(leaf_targets[k])}, "
                         f"outside the {n_targets} the op has")
    leaf_ids = np.unique(leaf_nodes)
    leaf_row = np.full(n, len(leaf_ids), dtype=np.int64)
    leaf_row[leaf_ids] = np.arange(len(leaf_ids))
    # onnxruntime sums in the weights' own precision: float32 unless given as double tensors
    weights = np.zeros((len(leaf_ids) + 1, n_targets), dtype=leaf_values.dtype)
    scored = np.zeros(weights.shape, bool)
    at = (leaf_row[leaf_nodes], leaf_targets)
    if how in ("SUM", "AVERAGE"):
        np.add.at(weights, at, leaf_values)
    else:
        weights[:] = np.inf if how == "MIN" else -np.inf
        (np.minimum if how == "MIN" else np.maximum).at(weights, at, leaf_values)
        weights[~np.isfinite(weights)] = 0.0
    scored[at] = True
    split_modes = tuple(int(m) for m in np.unique(table.mode[~is_leaf]))
    members, member_row = _member_sets(table) if MEMBER in split_modes else (None, None)
    missing = table.missing_true & ~is_leaf
    return Forest(
        feature=feature, threshold=table.threshold, mode=table.mode, children=children.reshape(-1),
        missing_true=missing if missing.any() else None, members=members, member_row=member_row,
        roots=table.roots, depth=depth, leaf_row=leaf_row, weights=weights, scored=scored,
        modes=split_modes or (LEQ,), n_features=int(feature.max(initial=-1)) + 1, describe=tuple(table.describe))


def _depth(children: np.ndarray, is_leaf: np.ndarray, roots: np.ndarray, describe: Sequence[str]) -> int:
    """Levels below the roots, walking all trees at once; a cycle is an error naming a node on it."""
    frontier, depth = np.unique(roots), 0
    frontier = frontier[~is_leaf[frontier]]
    while frontier.size:
        depth += 1
        if depth > len(is_leaf):
            raise ValueError(f"the trees have a cycle through {describe[int(frontier[0])]} "
                             "(nodes_truenodeids / nodes_falsenodeids lead back to it)")
        frontier = np.unique(np.concatenate([children[2 * frontier], children[2 * frontier + 1]]))
        frontier = frontier[~is_leaf[frontier]]
    return depth


def _member_sets(table: NodeTable) -> tuple[np.ndarray, np.ndarray]:
    member_nodes = np.flatnonzero(table.mode == MEMBER)
    width = max((len(s) for s in table.members), default=1)
    members = np.full((len(member_nodes) + 1, max(width, 1)), np.nan, dtype=table.threshold.dtype)
    for row, values in enumerate(table.members):
        members[row, :len(values)] = values
    member_row = np.full(len(table.mode), len(member_nodes), dtype=np.int64)
    member_row[member_nodes] = np.arange(len(member_nodes))
    return members, member_row


def node_ids(treeids: Sequence[int], nodeids: Sequence[int], what: str) -> dict[tuple[int, int], int]:
    """(tree id, node id) -> global index, for the older ops' parallel node lists."""
    if len(treeids) != len(nodeids):
        raise ValueError(f"{what}: nodes_treeids has {len(treeids)} entries but nodes_nodeids has {len(nodeids)}")
    index: dict[tuple[int, int], int] = {}
    for i, key in enumerate(zip(treeids, nodeids)):
        if key in index:
            raise ValueError(f"{what}: tree {key[0]} lists node id {key[1]} twice (entries {index[key]} and {i})")
        index[key] = i
    return index
