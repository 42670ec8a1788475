"""Evaluate nodes whose inputs are all constants, once, at export time.

The node runs through the edge runtime's own kernel (so folding can never disagree with running)
and its outputs become constants. Nodes are left alone when they draw random numbers, have side
effects, carry nested graphs, produce something that is not a plain array, or would produce a
constant much bigger than their inputs (``ConstantOfShape`` of a large shape is cheaper to run
than to store).
"""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import get_kernel, has_kernel, wants_output_count
from exporter import ir
from exporter.passes.graph_edit import constant, copy_model, remove_nodes
from schemas import get_schema, has_schema

# A folded output may exceed its inputs' total size by at most this much.
MAX_GROWTH_BYTES = 1 << 20

NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


def fold_constants(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace all-constant nodes by their values; returns the new model and the number folded."""
    model = copy_model(model)
    return model, _fold_graph(model.graph, {})


def _fold_graph(graph: ir.Graph, outer: dict[str, np.ndarray]) -> int:
    folded = 0
    doomed = []
    for node in graph.nodes:
        subgraphs = list(node.subgraphs())
        if subgraphs:
            scope = {**outer, **graph.constants()}
            for sub in subgraphs:
                folded += _fold_graph(sub, scope)
            continue
        results = _evaluate(graph, node, outer)
        if results is None:
            continue
        for name, array in zip(node.outputs, results):
            if name:
                graph.values[name] = ir.Value(name, data=array)
        doomed.append(node)
    remove_nodes(graph, doomed)
    return folded + len(doomed)


def _evaluate(graph: ir.Graph, node: ir.Node, outer: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    if node.op_type in NONDETERMINISTIC or not has_schema(node.op_type, node.domain):
        return None
    schema = get_schema(node.op_type, node.domain)
    if schema.stateful or not has_kernel(node.op_type, node.domain):
        return None
    args = []
    for name in node.inputs:
        value = constant(graph, name, outer) if name else None
        if name and value is None:
            return None
        args.append(value)
    if schema.max_inputs is not None:
        args += [None] * (schema.max_inputs - len(args))
    try:
        attrs = schema.resolve_attrs(node.attrs)
        if wants_output_count(node.op_type, node.domain):  # as the runtime's plan passes it
            attrs["n_outputs"] = len(node.outputs)
        result = get_kernel(node.op_type, node.domain)(*args, xp=np, **attrs)
    except Exception:  # a node that cannot run now is left for the runtime, which reports it properly
        return None
    results = list(result) if type(result) is tuple else [result]
    results = results[: len(node.outputs)]
    if len(results) < len(node.outputs) or not all(isinstance(r, (np.ndarray, np.generic)) for r in results):
        return None
    results = [np.asarray(r) for r in results]
    budget = sum(a.nbytes for a in args if isinstance(a, np.ndarray)) + MAX_GROWTH_BYTES
    if sum(r.nbytes for r in results) > budget:
        return None
    return results
