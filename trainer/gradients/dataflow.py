"""Gradients of the dataflow primitives: cond's Switch and Merge node by node, and a while_loop
whole (``while_loop_gradient``): a backward loop re-runs the body on the inputs the forward loop
pushed on its stacks, in reverse order, differentiating it and accumulating gradients for the
tensors it captured (trainer/control_flow.py builds both loops).
"""

from __future__ import annotations

import numpy as np

from schemas.registry import get_schema
from trainer.control_flow import WhileContext, WhileLoop, in_frame, next_stack_tag, while_loop
from trainer.gradients.helpers import fs
from trainer.gradients.registry import gradients, register_gradient
from trainer.graph import GraphError, Tensor
from trainer.ops import add, constant, convert_to_tensor, less, subtract, zeros_like

D = "flowstack"


@register_gradient("Switch", D)
def _switch(node, grads):
    # The taken branch sent gradient back; the other output is dead at run time, so a zero
    # stand-in guarded by the same predicate keeps the Merge well formed.
    data, pred = node.inputs
    gf, gt = grads
    if gf is None and gt is None:
        return [None, None]
    if gf is None:
        gf = fs("Switch", [fs("ZerosLike", [data]), pred], n=2)[0]
    if gt is None:
        gt = fs("Switch", [fs("ZerosLike", [data]), pred], n=2)[1]
    return [fs("Merge", [gf, gt], n=2)[0], None]


@register_gradient("Merge", D)
def _merge(node, grads):
    pred = node.cond_pred
    g = grads[0]
    if g is None:
        return [None] * len(node.inputs)
    false_g, true_g = fs("Switch", [g, pred], n=2)
    return [false_g, true_g]


def while_loop_gradient(loop: WhileLoop, exit_grads, wanted=lambda t: True) -> list[tuple[Tensor, Tensor]]:
    """(outer tensor, gradient) pairs, summed per tensor by the caller, for the loop's initial
    values and the captured tensors ``wanted`` says the caller needs (a loop over a fed
    sequence need not accumulate the sequence's gradient)."""
    if not loop.pushes and loop.counter_index:
        raise GraphError(f"while_loop {loop.frame_name!r} was built with back_prop=False: nothing can be "
                         f"differentiated through it (stop_gradient its results, or build it with back_prop=True)")
    outer = loop.ctx.outer
    while outer is not None:
        if isinstance(outer, WhileContext):
            # Its per-iteration stacks would mix the runs of every outer iteration.
            raise NotImplementedError(
                f"gradient of while_loop {loop.frame_name!r}: loops nested in loops are not differentiable yet")
        outer = outer.outer
    g = loop.ctx.graph
    n_user = loop.counter_index
    exits = loop.exit_tensors()
    diff = [i for i in range(n_user) if exits[i].dtype is not None and exits[i].dtype.kind == "f"]
    captured = [t for t in loop.ctx.captured() if t.dtype is not None and t.dtype.kind == "f" and wanted(t)]
    n_iter = exits[loop.counter_index]
    init_g = [exit_grads[i] if exit_grads[i] is not None else zeros_like(exits[i]) for i in diff]
    init_acc = [zeros_like(c) for c in captured]
    k0 = constant(np.asarray(0, np.int64))
    last = subtract(n_iter, np.asarray(1, np.int64))  # the forward iteration the first backward one undoes
    stack_names = [p.attrs["stack_name"] for p in loop.pushes]

    def bcond(k, *rest):
        return less(k, n_iter)

    def bbody(k, *rest):
        gs, accs = list(rest[: len(diff)]), list(rest[len(diff):])
        idx = subtract(last, k)
        xs = [g.create_op("StackPop", [idx], {"stack_name": stack_names[i]}, domain=D,
                          name=f"{loop.frame_name}_grad/pop").outputs[0] for i in range(n_user)]
        for i, x in enumerate(xs):
            x.type = loop.body_inputs[i].type
        ctx = g.current_control_flow_context()
        remat_start = len(ctx.nodes)
        ys = list(loop.body_fn(*xs))
        ys = [convert_to_tensor(y) for y in ys]
        remat = [nd for nd in ctx.nodes[remat_start:] if nd.op_type != "Enter"]  # twins of body_nodes
        ys = [in_frame(ctx, y) for y in ys]
        entered = [ctx.enter_inputs([c])[0] for c in captured]
        targets = [xs[i] for i in diff] + entered
        grads = gradients([ys[i] for i in diff], targets, grad_ys=gs)
        new_g = [gr if gr is not None else zeros_like(xs[i]) for gr, i in zip(grads[: len(diff)], diff)]
        new_acc = []
        for a, gr in zip(accs, grads[len(diff):]):
            if gr is None:
                new_acc.append(a)
            else:
                gr = gr.to_dense() if hasattr(gr, "to_dense") else gr
                # The accumulator is private to this loop (a fresh zeros each step): add in place.
                new_acc.append(g.create_op("AccumulateAdd", [a, gr], {}, domain=D).outputs[0])
        _skip_unread_cell_dx(ctx.nodes[remat_start:], new_g + new_acc)
        reused = _reuse_forward_values(loop, remat, idx, ctx, remat_start)
        return [add(k, np.asarray(1, np.int64))] + [reused.get(t, t) for t in new_g + new_acc]

    outs = while_loop(bcond, bbody, [k0] + init_g + init_acc, name=f"{loop.frame_name}_grad",
                      return_same_structure=True, differentiable=False)
    outs = list(outs)
    # Pairs, not a dict: one outer tensor may be several initial values and a captured tensor
    # at once (``while_loop(.., lambda a: a * x, [x])``), and each path's gradient counts.
    result = [(loop.enters[i].inputs[0], outs[1 + j]) for j, i in enumerate(diff)]
    result += [(c, outs[1 + len(diff) + j]) for j, c in enumerate(captured)]
    return result


def _reuse_forward_values(loop: WhileLoop, remat, idx, bctx, start) -> dict:
    """Point the gradient loop at the forward loop's own values instead of recomputing them.

    The gradient loop re-ran the body (``remat``) to have nodes to differentiate; each of those
    nodes has a twin in the forward body. Where the twins match op for op, the forward loop
    also pushes the twin's outputs (by reference, so it costs nothing), and every use of a
    recomputed output becomes a pop of the forward value: the recomputation is never run.
    Bodies with nested control flow (values that may be dead) keep the recomputation.
    """
    fwd = loop.body_nodes
    g = loop.ctx.graph
    if len(fwd) != len(remat) or any(a.op_type != b.op_type or a.domain != b.domain for a, b in zip(fwd, remat)):
        return {}
    if any(n.op_type in ("Switch", "Merge") and n.domain == D for n in loop.ctx.nodes if n not in loop.switches
           and n not in loop.merges):
        return {}
    mapping: dict = {}
    tag = next_stack_tag()  # each gradient of this loop gets stacks of its own
    for f, r in zip(fwd, remat):
        if get_schema(f.op_type, f.domain).stateful:
            continue
        for j, out in enumerate(f.outputs):
            name = f"{loop.frame_name}#fwd{tag}/{f.name}:{j}"
            with g.control_flow_context(loop.ctx):
                push = g.create_op("StackPush", [out], {"stack_name": name}, domain=D, name="keep")
            loop.counter_inc.control_inputs.append(push)  # the count waits for the push
            pop = g.create_op("StackPop", [idx], {"stack_name": name}, domain=D, name="forward_value")
            pop.outputs[0].type = r.outputs[j].type
            mapping[r.outputs[j]] = pop.outputs[0]
    for node in bctx.nodes[start:]:
        node.inputs = [mapping.get(t, t) if t is not None else None for t in node.inputs]
    return mapping


def _skip_unread_cell_dx(nodes, returned) -> None:
    """Fused-cell gradients whose input gradient nothing reads (the first layer's dx, when the
    sequence it reads needs no gradient) skip computing it."""
    read = {id(t) for t in returned}
    read.update(id(t) for n in nodes for t in n.inputs if t is not None)
    for n in nodes:
        if n.op_type == "LSTMBlockCellGrad" and n.domain == D and id(n.outputs[0]) not in read:
            n.attrs["need_dx"] = 0
