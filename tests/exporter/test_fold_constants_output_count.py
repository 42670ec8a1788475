"""fold_constants on ops whose kernels take the node's output count (LayerNormalization, MaxPool):
they fold like any other op when every input is a constant.

DeBERTa-v2/v3 normalizes its relative-position embeddings with a LayerNormalization of weights
alone and projects them with each layer's query and key weights; the LayerNormalization never
folded (its kernel wants ``n_outputs``, which folding did not pass), so neither did the six
layers' projections, 7 GFLOP of constant work on every run of deberta-v3-small.
"""

from __future__ import annotations

from exporter import ir
from exporter.passes import fold_constants
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn

ROWS, WIDTH = 6, 8


def normalized_positions_projected(constant_table: bool = True) -> ir.Model:
    """y = x @ LayerNormalization(table, scale, bias)ᵀ, the table a constant (or an input)."""
    nodes = [ir.Node("LayerNormalization", ["table", "scale", "bias"], ["normed"], {"axis": -1, "epsilon": 1e-7},
                     name="norm"),
             ir.Node("Transpose", ["normed"], ["normed_t"], {"perm": [1, 0]}, name="transpose"),
             ir.Node("MatMul", ["x", "normed_t"], ["y"], name="project")]
    constants = {"scale": randn(WIDTH), "bias": randn(WIDTH)}
    shapes = {"x": (3, WIDTH)}
    if constant_table:
        constants["table"] = randn(ROWS, WIDTH)
        inputs = ["x"]
    else:
        shapes["table"] = (ROWS, WIDTH)
        inputs = ["x", "table"]
    return model(graph(nodes, inputs, ["y"], constants, shapes))


def test_layer_normalization_of_constants_folds() -> None:
    before = normalized_positions_projected()
    after, count = fold_constants(before)
    assert count == 2 and ops(after) == ["MatMul"]
    assert_same_outputs(before, after, x=randn(3, WIDTH))


def test_layer_normalization_of_an_input_stays() -> None:
    before = normalized_positions_projected(constant_table=False)
    after, count = fold_constants(before)
    assert count == 0 and ops(after) == ["LayerNormalization", "Transpose", "MatMul"]


def test_max_pool_of_a_constant_folds_with_its_indices() -> None:
    nodes = [ir.Node("MaxPool", ["table"], ["pooled", "where"], {"kernel_shape": [2]}, name="pool"),
             ir.Node("Add", ["x", "pooled"], ["y"], name="add"),
             ir.Node("Cast", ["where"], ["where_f"], {"to": 1}, name="cast"),
             ir.Node("Add", ["y", "where_f"], ["z"], name="add_where")]
    before = model(graph(nodes, ["x"], ["z"], {"table": randn(1, 2, 5)}, {"x": (1, 2, 4)}))
    after, count = fold_constants(before)
    assert count == 2 and ops(after) == ["Add", "Add"]
    assert_same_outputs(before, after, x=randn(1, 2, 4))
