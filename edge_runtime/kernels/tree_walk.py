"""Tree ensembles as flat node arrays, walked level by level for a whole batch at once.

Every node of every tree gets one global index i and a run of ``stride`` slots from ``stride * i``:
slot 0 holds the false child, slot 1 the true child and, where some node sends missing values
(NaN) to its true child, slots 2 and 3 where a NaN goes (2: it compared false, so the node's
missing-value child; 3: it compared true, as NEQ does: the true child). Every per-node array is
repeated over its node's slots, so a walk carries slot positions and one step is
``children[slot + went_true (+ 2 isnan)]`` with no multiply. A leaf's slots all point back at it,
so a walk that has reached it stays there. The walk starts a (trees, rows) array at the roots and
takes one step per level for all rows and trees together (a few gathers), as many steps as the
deepest tree has levels: no per-row or per-tree Python loop.

Leaf values are a dense (leaf rows, targets) table; each node points at its row (split nodes at an
all-absent row), so aggregation is one gather and one reduction over the trees axis (boosted
trees, one target per tree, reduce a (trees, rows) array per target instead). Which
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
    # Per slot (nodes * stride), see the module docstring; leaves hold feature 0.
    feature: np.ndarray  # int
    threshold: np.ndarray  # float32 or float64
    mode: np.ndarray  # uint8
    children: np.ndarray  # int: the slot of the child each slot leads to
    every_slot: np.ndarray  # 0, 1, ... one per slot
    stride: int  # 2, or 4 where missing values have a child of their own
    members: np.ndarray | None  # (member nodes + 1, widest set) padded with NaN; MEMBER nodes' sets
    member_row: np.ndarray | None  # per slot: its node's row of ``members``
    roots: np.ndarray  # (trees,) the root slots
    # The walk visits the trees deepest first; walking[level] is how many trees are still above
    # their leaves at that level, so shallow trees stop costing steps once they are done.
    walking: tuple[int, ...]
    walk_order: np.ndarray | None  # the trees by depth, deepest first; None: already so
    unwalk: np.ndarray | None  # back from walk order to the trees' order
    leaf_row: np.ndarray  # per slot: its node's row of the weight tables
    weights: np.ndarray  # (leaf rows + 1, targets) float32 or float64; the last row is all absent
    scored: np.ndarray  # (leaf rows + 1, targets) bool: which weights are given
    # Where every leaf carries exactly one weight and every tree's leaves one target (boosted
    # trees: one tree per class and round), the trees sorted by target, the targets and where each
    # one's trees start: aggregation then reduces a (trees, rows) array, not (trees, rows, targets).
    tree_groups: tuple[np.ndarray, np.ndarray] | None
    leaf_value: np.ndarray | None  # (leaf rows + 1,) each leaf row's one weight, with tree_groups
    all_scored: bool  # every leaf row carries a weight for every target
    modes: tuple[int, ...]  # the split modes present
    n_features: int  # one more than the largest feature index a split reads
    describe: tuple[str, ...]  # (nodes,) how messages name each node

    @property
    def n_trees(self) -> int:
        return len(self.roots)

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """The leaf slot each row of ``x`` (rows, features) reaches in each tree: (trees, rows), so
        that a reduction over the trees adds whole rows in tree order, as onnxruntime adds them."""
        if x.shape[1] < self.n_features:
            slot = int(np.argmax(self.feature))
            raise ValueError(f"{self.describe[slot // self.stride]} reads feature {int(self.feature[slot])} "
                             f"(nodes_featureids), but X has {x.shape[1]} columns")
        rows = x.shape[0]
        flat = np.ascontiguousarray(x).reshape(-1)
        if rows == 1 and len(self.feature) <= ONE_ROW_SLOTS_PER_LEVEL * len(self.walking):
            return self._one_row(flat)
        row_start = np.arange(0, rows * x.shape[1], x.shape[1], dtype=self.children.dtype)
        roots = self.roots if self.walk_order is None else self.roots[self.walk_order]
        trees = len(roots)
        slot = np.repeat(roots, rows).reshape(trees, rows)
        feature, children, nan_slots = self.feature, self.children, self.stride == 4
        for count in self.walking:
            walk = slot if count == trees else slot[:count]
            column = feature.take(walk)
            if rows > 1:
                column += row_start
            value = flat.take(column)
            step = self._went_true(walk, value).view(np.uint8)
            if nan_slots:
                step = step + (np.isnan(value).view(np.uint8) << 1)
            if count == trees:
                slot = children.take(walk + step)
            else:
                slot[:count] = children.take(walk + step)
        return slot if self.unwalk is None else slot[self.unwalk]

    def _one_row(self, x: np.ndarray) -> np.ndarray:
        """``leaves`` for one row: every split's direction at once (one comparison over all slots),
        then three calls a level instead of seven, where NumPy's per-call cost is the time."""
        value = x.take(self.feature)
        step = self._went_true(self.every_slot, value).view(np.uint8)
        if self.stride == 4:
            step = step + (np.isnan(value).view(np.uint8) << 1)
        roots = self.roots if self.walk_order is None else self.roots[self.walk_order]
        slot, trees = roots.copy(), len(roots)
        for count in self.walking:
            if count == trees:
                slot = self.children.take(slot + step.take(slot))
            else:
                slot[:count] = self.children.take(slot[:count] + step.take(slot[:count]))
        slot = slot[:, None]
        return slot if self.unwalk is None else slot[self.unwalk]

    def _went_true(self, slot: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Whether each split sends its value to the true child (NaN compares false, except NEQ)."""
        threshold = self.threshold.take(slot)
        if len(self.modes) == 1 and self.modes[0] != MEMBER:
            went = _COMPARE[self.modes[0]](value, threshold)
        else:
            mode = self.mode.take(slot)
            went = np.zeros(slot.shape, bool)
            for m in self.modes:
                here = mode == m
                if m == MEMBER:
                    sets = self.members[self.member_row[slot[here]]]
                    went[here] = (sets == value[here][:, None]).any(axis=1)
                else:
                    went[here] = _COMPARE[m](value[here], threshold[here])
        return went

    def aggregate(self, leaves: np.ndarray, how: str) -> tuple[np.ndarray, np.ndarray]:
        """Per row and target, the trees' weights combined by ``how``, and whether any tree gave one."""
        rows = self.leaf_row[leaves]  # (trees, rows)
        combine = _COMBINE[how]
        if self.tree_groups is not None:
            targets, starts = self.tree_groups
            per_target = combine.reduceat(self.leaf_value[rows], starts, axis=0)
            scores = np.zeros((leaves.shape[1], self.weights.shape[1]), self.weights.dtype)
            scores[:, targets] = per_target.T
            scored = np.zeros(scores.shape, bool)
            scored[:, targets] = True
        else:
            values = self.weights[rows]  # (trees, rows, targets)
            scored = np.ones(values.shape[1:], bool) if self.all_scored else self.scored[rows].any(axis=0)
            if how in ("MIN", "MAX"):
                values = np.where(self.scored[rows], values, np.inf if how == "MIN" else -np.inf)
            scores = combine.reduce(values, axis=0)
            scores = np.where(scored, scores, 0).astype(values.dtype)
        return (scores / self.n_trees if how == "AVERAGE" else scores), scored


# A single row's walk compares at every split first (Forest._one_row) where the forest has at most
# this many slots per level: each level it saves costs ~1 us of NumPy calls, each slot ~1.6 ns.
# Measured per call (OPENBLAS_NUM_THREADS=1), all splits against the walk: a decision tree (670
# slots, 15 levels) 21 against 47 us, gradient boosting's 300 trees (8,948 slots, 3 levels) 17.5
# against 15.3 us, a 100-tree forest (80,224 slots, 17 levels) 133 against 63 us.
ONE_ROW_SLOTS_PER_LEVEL = 2000

_COMBINE = {"SUM": np.add, "AVERAGE": np.add, "MIN": np.minimum, "MAX": np.maximum}


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
    _depth(children.reshape(-1), is_leaf, table.roots, table.describe)  # refuses cycles first
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
    roots, tree_groups, leaf_value = _group_trees_by_target(table.roots, children.reshape(-1), is_leaf, leaf_row, weights, scored)
    all_scored = bool(scored[:-1].all()) and bool((leaf_row[is_leaf] < len(leaf_ids)).all())
    split_modes = tuple(int(m) for m in np.unique(table.mode[~is_leaf]))
    members, member_row = _member_sets(table) if MEMBER in split_modes else (None, None)
    missing = table.missing_true & ~is_leaf
    stride = 4 if missing.any() else 2
    slot_type = np.int32 if n * stride < 2**31 else np.int64
    true_child, false_child = children[:, 0], children[:, 1]
    slots = np.stack([false_child, true_child, np.where(missing, true_child, false_child), true_child], 1)[:, :stride]
    per_slot = lambda a: np.repeat(a, stride)  # noqa: E731
    return Forest(
        feature=per_slot(feature).astype(slot_type), threshold=per_slot(table.threshold), mode=per_slot(table.mode),
        children=(slots * stride).reshape(-1).astype(slot_type), every_slot=np.arange(n * stride, dtype=slot_type),
        stride=stride, members=members,
        member_row=None if member_row is None else per_slot(member_row),
        roots=(roots * stride).astype(slot_type), **_walk_plan(_tree_depths(children.reshape(-1), is_leaf, roots)),
        leaf_row=per_slot(leaf_row), weights=weights,
        scored=scored, tree_groups=tree_groups, leaf_value=leaf_value, all_scored=all_scored, modes=split_modes or (LEQ,),
        n_features=int(feature.max(initial=-1)) + 1, describe=tuple(table.describe))


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


def _tree_depths(children: np.ndarray, is_leaf: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """Each tree's depth (levels from its root to its deepest leaf), walking all trees at once;
    trees that share subtrees (no exporter writes them) all get the deepest one's."""
    depths = np.zeros(len(roots), dtype=np.int64)
    tree, node, level = np.arange(len(roots)), roots, 0
    while True:
        inner = ~is_leaf[node]
        tree, node = tree[inner], node[inner]
        if not node.size:
            return depths
        level += 1
        depths[tree] = level
        if 2 * node.size > len(is_leaf):  # more walks than nodes: trees share subtrees
            return np.full(len(roots), _depth(children, is_leaf, roots, ()))
        tree, node = np.repeat(tree, 2), np.stack([children[2 * node], children[2 * node + 1]], 1).reshape(-1)


def _walk_plan(depths: np.ndarray) -> dict:
    order = np.argsort(-depths, kind="stable")
    ordered = depths[order]
    walking = tuple(int(np.count_nonzero(ordered > level)) for level in range(int(ordered.max(initial=0))))
    if (order == np.arange(len(order))).all():
        return {"walking": walking, "walk_order": None, "unwalk": None}
    return {"walking": walking, "walk_order": order, "unwalk": np.argsort(order)}


def _group_trees_by_target(roots, children, is_leaf, leaf_row, weights, scored):
    """The roots reordered so trees of one target are adjacent (stable: tree order within a target
    is kept), the targets with where their trees start, and each leaf row's one weight; or the roots
    unchanged and None where a leaf has no weight or several, or a tree's leaves differ in target."""
    one_each = scored[:-1].sum(axis=1) == 1
    if not one_each.all() or (leaf_row[is_leaf] >= len(one_each)).any():
        return roots, None, None
    leaf_target = np.append(np.argmax(scored[:-1], axis=1), -1)
    reached_tree, reached_target = [], []
    tree, node = np.arange(len(roots)), roots
    while node.size:  # walk every tree at once, noting the target of each leaf reached
        if node.size > len(is_leaf):  # trees that share subtrees: not worth grouping
            return roots, None, None
        leaf = is_leaf[node]
        reached_tree.append(tree[leaf])
        reached_target.append(leaf_target[leaf_row[node[leaf]]])
        inner = node[~leaf]
        tree, node = np.repeat(tree[~leaf], 2), np.stack([children[2 * inner], children[2 * inner + 1]], 1).reshape(-1)
    tree, target = np.concatenate(reached_tree), np.concatenate(reached_target)
    lowest, highest = np.full(len(roots), len(leaf_target)), np.full(len(roots), -1)
    np.minimum.at(lowest, tree, target)
    np.maximum.at(highest, tree, target)
    if (lowest != highest).any():
        return roots, None, None
    tree_target = lowest
    order = np.argsort(tree_target, kind="stable")
    targets, starts = np.unique(tree_target[order], return_index=True)
    leaf_value = np.take_along_axis(weights, leaf_target[:, None].clip(0), axis=1)[:, 0]
    return roots[order], (targets, starts), leaf_value


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
