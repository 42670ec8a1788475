"""Make ``Add(MatMul(x, W), b)`` one ``Gemm`` where x is a matrix and W and b are constants.

tf2onnx writes a Keras Dense layer, and PyTorch's dynamo exporter a Linear layer in some graphs,
as MatMul then Add: as a Gemm the bias rides in the product's output pass, the weight takes the
layout the runtime multiplies fastest (``transpose_gemm_weights``), and a following activation
fuses into a FusedGemm. Applies where x is known to be rank 2, W is a constant matrix, the bias a
constant of N or 1 x N values (either operand of the Add), and the product is read by the Add
alone; not where x feeds sibling MatMuls with constant weights, which ``merge_sibling_matmuls``
makes one wider product (queries, keys and values).
"""

from __future__ import annotations

from exporter import ir
from exporter.passes.graph_edit import constant
from exporter.passes.pattern import ChainReader, rewrite_matches


def matmul_add_to_gemm(model: ir.Model) -> tuple[ir.Model, int]:
    """Rewrite MatMul + constant bias Add pairs as Gemm; returns the new model and how many."""
    return rewrite_matches(model, _match)


def _match(reader: ChainReader, matmul: ir.Node) -> tuple[list[ir.Node], ir.Node] | None:
    if (matmul.domain, matmul.op_type) != ("", "MatMul"):
        return None
    x, w = matmul.inputs
    x_value = reader.graph.values.get(x)
    weight = constant(reader.graph, w)
    if x_value is None or x_value.shape is None or len(x_value.shape) != 2 or weight is None or weight.ndim != 2:
        return None
    if weight.dtype.kind != "f" or any(_constant_matmul(reader, n) for n in reader.read.get(x, []) if n is not matmul):
        return None
    product = matmul.outputs[0]
    add = reader.sole_reader(product, "Add")
    bias_name = reader.operand_besides(add, product) if add is not None else None
    bias = constant(reader.graph, bias_name) if bias_name is not None else None
    if bias is None or bias.dtype != weight.dtype or bias.shape not in ((weight.shape[1],), (1, weight.shape[1])):
        return None
    gemm = ir.Node("Gemm", [x, w, bias_name], list(add.outputs), {"alpha": 1.0, "beta": 1.0},
                   matmul.name or add.name)
    return [matmul, add], gemm


def _constant_matmul(reader: ChainReader, node: ir.Node) -> bool:
    """A MatMul by a constant matrix: a sibling ``merge_sibling_matmuls`` would merge with."""
    if (node.domain, node.op_type) != ("", "MatMul"):
        return False
    weight = constant(reader.graph, node.inputs[1])
    return weight is not None and weight.ndim == 2
