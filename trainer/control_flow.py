"""``cond`` and ``while_loop``, built from Switch, Merge, Enter, Exit, NextIteration and LoopCond.

Both build a *context* while the user's functions run: a tensor from outside that a branch uses
is routed through a Switch on the predicate (so it is dead when the branch is not taken), one a
loop body uses enters the loop frame through a constant Enter, and ops without inputs get a
control edge from the context's pivot so they run once per branch/iteration.

A ``WhileLoop`` record keeps each loop's structure (enters, merges, switches, exits, the body's
inputs and outputs) so exporters can rebuild a functional ``Loop`` and ``gradients`` can build
the backward loop (``while_loop_gradient`` in trainer/gradients/dataflow.py): the forward body
pushes its per-iteration inputs on step-local stacks (StackPush, a pass-through), and the
gradient loop re-runs the body on them in reverse order (StackPop by index), differentiating it
and accumulating gradients for captured tensors.
"""

from __future__ import annotations

import numpy as np

from schemas.registry import TensorType
from trainer import nest
from trainer.graph import TRAINER_DOMAIN, GraphError, Node, Tensor, get_default_graph
from trainer.ops import constant, convert_to_tensor
from trainer.tensor_shape import as_shape_tuple, shapes_compatible
from trainer.tensor_array import TensorArray

__all__ = ["CondContext", "WhileContext", "WhileLoop", "cond", "may_be_dead", "while_loop"]

D = TRAINER_DOMAIN


def _inside(node, ctx) -> bool:
    c = node.cf_context
    while c is not None:
        if c is ctx:
            return True
        c = c.outer
    return False


class _Context:
    def __init__(self, graph, outer):
        self.graph = graph
        self.outer = outer
        self.pivot = None
        self.nodes: list = []
        self._entered: dict = {}
        self._routed: set = set()

    def add_node(self, node) -> None:
        self.nodes.append(node)
        # (a control input from outside, control_dependencies around the cond, does not make the
        # node wait for its branch: it still needs the pivot, as in TensorFlow)
        if not node.inputs and self.pivot is not None and not any(_inside(c, self) for c in node.control_inputs):
            node.control_inputs.append(self.pivot.node)

    def enter_inputs(self, inputs):
        out = []
        for t in inputs:
            if t is None or t in self._routed or _inside(t.node, self) or t.node is getattr(self.pivot, "node", None):
                out.append(t)
                continue
            if t not in self._entered:
                with self.graph.control_flow_context(self.outer):
                    routed = self._route_in(t)
                self._entered[t] = routed
                self._routed.add(routed)
            out.append(self._entered[t])
        return out


class CondContext(_Context):
    """One branch of a cond: outside tensors come in through Switch(t, pred)[branch]."""

    def __init__(self, graph, outer, pred, branch):
        super().__init__(graph, outer)
        self.pred, self.branch = pred, branch

    def _route_in(self, t):
        return self.graph.create_op("Switch", [t, self.pred], {}, domain=D, name="cond/switch_in").outputs[self.branch]


class WhileContext(_Context):
    """A loop frame: outside tensors come in through constant Enters."""

    def __init__(self, graph, outer, frame_name, parallel_iterations):
        super().__init__(graph, outer)
        self.frame_name = frame_name
        self.parallel_iterations = parallel_iterations
        self.loop_nodes = self.nodes

    def add_node(self, node) -> None:
        # A node fed only by loop-invariant values (constant Enters) would run in every
        # iteration the frame ever sees, including the one where the predicate is false, and
        # feed NextIteration forever; waiting on the pivot makes it dead there, as in TensorFlow.
        if (node.inputs and not node.control_inputs and self.pivot is not None and node.op_type != "Enter"
                and all(t is None or t in self._routed for t in node.inputs)):
            node.control_inputs.append(self.pivot.node)
        super().add_node(node)

    def _route_in(self, t):
        node = self.graph.create_op("Enter", [t], {"frame_name": self.frame_name, "is_constant": 1,
                                                   "parallel_iterations": self.parallel_iterations},
                                    domain=D, name="enter_const")
        node.cf_context = self  # it lives in the frame it feeds
        self.nodes.append(node)
        return node.outputs[0]

    def captured(self) -> dict:
        """Outside tensor -> its constant Enter inside this frame."""
        return dict(self._entered)


def may_be_dead(node) -> bool:
    """Whether ``node``'s outputs may be dead in a step: a Switch's, or those of a node inside a
    cond branch (a pass's synthetic step or a fused loop is neither)."""
    if node.op_type == "Switch" and node.domain == D:
        return True
    ctx = getattr(node, "cf_context", None)
    while ctx is not None:
        if isinstance(ctx, CondContext):
            return True
        ctx = ctx.outer
    return False


def in_frame(ctx: WhileContext, t: Tensor) -> Tensor:
    """A body output as a per-iteration tensor of the frame ``ctx``.

    A body may return a tensor from outside the loop (``lambda i, a: (i + 1, x)``). Its constant
    Enter is one value for every iteration, not a value of this iteration, so it cannot feed
    NextIteration directly; an Identity inside the frame (waiting on the pivot, see add_node)
    re-emits it each iteration and gives its gradient a path back to ``x``.
    """
    from trainer.ops import identity

    if _inside(t.node, ctx) and t not in ctx._routed:
        return t
    return identity(ctx.enter_inputs([t])[0])


def cond(pred, true_fn=None, false_fn=None, strict: bool = False, name: str | None = None, fn1=None, fn2=None):
    """``true_fn()`` if ``pred`` else ``false_fn()``; only the taken branch runs (TensorFlow 1.x's
    ``tf.cond``; ``fn1``/``fn2`` are its old names for the two functions).

    Both functions must return the same nest of tensors (or values convertible to them). Unless
    ``strict``, a result that is a one-element list or tuple comes back as its element.
    """
    true_fn, false_fn = true_fn if true_fn is not None else fn1, false_fn if false_fn is not None else fn2
    if not (callable(true_fn) and callable(false_fn)):
        raise TypeError("cond: true_fn and false_fn must be callables of no arguments")
    name = name or "cond"
    g = get_default_graph()
    pred = convert_to_tensor(pred)
    with g.name_scope(name):
        outer = g.current_control_flow_context()
        s_false, s_true = g.create_op("Switch", [pred, pred], {}, domain=D, name="pred_switch").outputs
        results = []
        contexts = []
        for branch, fn, sw in ((0, false_fn, s_false), (1, true_fn, s_true)):
            ctx = CondContext(g, outer, pred, branch)
            contexts.append(ctx)
            with g.control_flow_context(ctx):
                ctx.pivot = g.create_op("Identity", [sw], {}, name=f"pivot_{branch}", in_context=False).outputs[0]
                ctx.pivot.node.cf_context = ctx
                structure = fn()
                # Every branch output must live in the branch (a dead value when it is not taken).
                vals = [_branch_output(g, ctx, v, branch) for v in nest.flatten(structure)]
            results.append((vals, structure))
        (f_vals, f_structure), (t_vals, structure) = results
        false_ctx, true_ctx = contexts
        if not nest.same_structure(f_structure, structure) or len(f_vals) != len(t_vals):
            raise GraphError(f"cond {name!r}: true_fn returns {nest.describe(structure)}, false_fn "
                             f"{nest.describe(f_structure)}; both must return the same structure")
        outs = []
        for f, t in zip(f_vals, t_vals):
            if f.dtype != t.dtype:
                raise GraphError(f"cond {name!r}: branches return dtypes {t.dtype} (true) and {f.dtype} (false)")
            m = g.create_op("Merge", [f, t], {}, domain=D, name="merge")
            m.cond_pred = pred
            outs.append(m.outputs[0])
        g.conds.append({
            "pred": pred.name,
            "merges": [o.node.name for o in outs],
            "false_outputs": [t.name for t in f_vals],
            "true_outputs": [t.name for t in t_vals],
            # outside tensor -> the Switch output each branch reads it through
            "false_inputs": {t.name: r.name for t, r in false_ctx._entered.items()},
            "true_inputs": {t.name: r.name for t, r in true_ctx._entered.items()},
        })
    # A branch's op comes back as the Merge node, which runs the taken branch's op (TF returns an op).
    outs = [o.node if isinstance(v, Node) else o for o, v in zip(outs, nest.flatten(structure))]
    result = nest.pack_as(structure, outs, keep_lists=True)
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1:
        return result[0]
    return result


def _branch_output(g, ctx, value, branch: int) -> Tensor:
    """A branch result as a tensor living in the branch; an op (``tf.group``, an assign's node)
    becomes the branch's pivot, run after it."""
    if isinstance(value, Node):
        return g.create_op("Identity", [ctx.pivot], {}, name=f"out_{branch}", control_inputs=[value]).outputs[0]
    return g.create_op("Identity", [convert_to_tensor(value)], {}, name=f"out_{branch}").outputs[0]


class WhileLoop:
    """The structure of one while_loop, for gradients and for exporters."""

    def __init__(self, ctx, enters, merges, switches, exits, next_iterations, loop_cond, body_inputs,
                 body_outputs, counter_index, cond_fn, body_fn, pushes):
        self.ctx = ctx
        self.frame_name = ctx.frame_name
        self.enters, self.merges, self.switches, self.exits = enters, merges, switches, exits
        self.next_iterations, self.loop_cond = next_iterations, loop_cond
        self.body_inputs, self.body_outputs = body_inputs, body_outputs
        self.counter_index = counter_index
        self.cond_fn, self.body_fn = cond_fn, body_fn
        self.pushes = pushes

    def exit_tensors(self) -> list[Tensor]:
        return [e.outputs[0] for e in self.exits]

    def outer_inputs(self) -> list:
        nodes = [e.inputs[0].node for e in self.enters]
        nodes += [t.node for t in self.ctx.captured()]
        return nodes

    def to_dict(self) -> dict:
        return {
            "frame_name": self.frame_name,
            "enters": [n.name for n in self.enters],
            "merges": [n.name for n in self.merges],
            "switches": [n.name for n in self.switches],
            "exits": [n.name for n in self.exits],
            "next_iterations": [n.name for n in self.next_iterations],
            "loop_cond": self.loop_cond.name,
            "body_inputs": [t.name for t in self.body_inputs],
            "body_outputs": [t.name for t in self.body_outputs],
            "captured": {t.name: e.name for t, e in self.ctx.captured().items()},
            "counter_index": self.counter_index,
        }


_loop_counter = [0]


def next_stack_tag() -> int:
    """A number no other loop stack name has used: each loop, and each gradient of one, gets its own stacks."""
    _loop_counter[0] += 1
    return _loop_counter[0]


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations: int = 10, back_prop: bool = True,
               swap_memory: bool = False, name: str | None = None, maximum_iterations=None,
               return_same_structure: bool = False, *, differentiable: bool = True):
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)``; returns the final values,
    as TensorFlow 1.x's ``tf.while_loop``.

    ``loop_vars`` is a tensor or a nest of them (tuples, lists, namedtuples, dicts); ``body``
    returns the same nest. Each loop variable keeps its dtype, and its shape unless its entry in
    ``shape_invariants`` (the same nest, of shapes) allows more; the body must not create
    variables. ``maximum_iterations`` bounds the trip count. The result is the nest, or its one
    tensor when it holds one and ``return_same_structure`` is false. ``back_prop=False`` (and
    ``differentiable=False``, which gradient loops use) records no per-iteration history, so
    nothing can be differentiated through the loop; ``swap_memory`` is a memory hint with no
    effect here.
    """
    name = name or "while"
    if maximum_iterations is not None:
        return _bounded_while(cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop, name,
                              maximum_iterations, return_same_structure, differentiable)
    if isinstance(loop_vars, (list, tuple)) and not loop_vars:
        raise ValueError(f"while_loop {name!r}: no loop variables")
    leaves = nest.flatten(loop_vars)
    # A TensorArray travels through the loop as its flow, and comes back as the array the body returned.
    arrays = {i: leaf for i, leaf in enumerate(leaves) if isinstance(leaf, TensorArray)}
    invariants = _flat_invariants(shape_invariants, loop_vars, name)
    for i, ta in arrays.items():
        invariants[i] = None if ta.shape_may_change() else _KEEP
    returned = dict(arrays)

    def rebuilt(values) -> list:
        return [returned[i].with_flow(v) if i in arrays else v for i, v in enumerate(values)]

    def flat_cond(*values):
        return cond(*_arguments(loop_vars, rebuilt(values)))

    def flat_body(*values):
        out = _as_arguments(body(*_arguments(loop_vars, rebuilt(values))))
        if not nest.same_structure(list(_as_arguments(loop_vars)), list(out)):
            raise GraphError(f"while_loop {name!r}: the body returns {nest.describe(out)} for loop variables "
                             f"{nest.describe(loop_vars)}; it must return the same structure")
        flat_out = nest.flatten(out)
        for i in arrays:
            if not isinstance(flat_out[i], TensorArray):
                raise GraphError(f"while_loop {name!r}: loop variable {i} is a TensorArray, but the body returns "
                                 f"{type(flat_out[i]).__name__} there (return the array write() returned)")
            returned[i] = flat_out[i]
        return [v.flow if i in arrays else v for i, v in enumerate(flat_out)]

    flows = [leaf.flow if i in arrays else leaf for i, leaf in enumerate(leaves)]
    results = rebuilt(_while_loop_flat(flat_cond, flat_body, flows, invariants, parallel_iterations, name,
                                       differentiable and back_prop))
    if len(results) == 1 and not return_same_structure:
        return results[0]
    return nest.pack_as(loop_vars, results, keep_lists=True)


def _as_arguments(structure) -> list:
    """What ``cond`` and ``body`` are called with: the items of a tuple or list, else the one value."""
    return list(structure) if isinstance(structure, (list, tuple)) else [structure]


def _arguments(loop_vars, values) -> list:
    return _as_arguments(nest.pack_as(loop_vars, values, keep_lists=True))


_KEEP = object()  # no shape invariant given: the loop variable keeps the shape it enters with


def _flat_invariants(shape_invariants, loop_vars, name: str) -> list:
    """Per flat loop variable: ``_KEEP``, a shape tuple, or None (any shape)."""
    if shape_invariants is None:
        return [_KEEP] * len(nest.flatten(loop_vars))
    try:  # a shape is a list of dims: flatten the nest of shapes down to the shapes, not their dims
        shapes = nest.flatten_up_to(loop_vars, shape_invariants)
    except nest.StructureError:
        raise ValueError(f"while_loop {name!r}: shape_invariants {shape_invariants!r} do not have the structure of "
                         f"the loop variables {nest.describe(loop_vars)}") from None
    return [as_shape_tuple(s) for s in shapes]


def _bounded_while(cond, body, loop_vars, shape_invariants, parallel_iterations, back_prop, name, maximum_iterations,
                   return_same_structure, differentiable):
    """``while_loop`` with ``maximum_iterations``: a counter joins the loop variables and the condition."""
    from trainer.array_ops import logical_and
    from trainer.ops import add, cast, less

    with get_default_graph().name_scope(name + "_bound"):
        bound = convert_to_tensor(maximum_iterations)
        counter = constant(np.zeros((), bound.dtype), name="iterations")

    def bounded_cond(i, inner):
        return logical_and(less(i, bound), cond(*_as_arguments(inner)))

    def bounded_body(i, inner):
        out = _as_arguments(body(*_as_arguments(inner)))
        return add(i, cast(1, bound.dtype)), out if isinstance(loop_vars, (list, tuple)) else out[0]

    invariants = None if shape_invariants is None else ((), shape_invariants)
    _, inner = while_loop(bounded_cond, bounded_body, (counter, loop_vars), invariants, parallel_iterations, back_prop,
                          name=name, return_same_structure=True, differentiable=differentiable)
    if len(nest.flatten(inner)) == 1 and not return_same_structure:
        return nest.flatten(inner)[0]
    return inner


def _while_loop_flat(cond_fn, body_fn, vals: list, invariants: list, parallel_iterations: int, name: str,
                     differentiable: bool):
    """The loop over a flat list of tensors (see ``while_loop``); returns the flat results."""
    g = get_default_graph()
    vals = [convert_to_tensor(v) for v in vals]
    outer = g.current_control_flow_context()
    with g.name_scope(name) as scope:
        frame = scope.rstrip("/")
        counter = constant(np.asarray(0, np.int64), name="iteration_counter")
        vals = vals + [counter]
        n = len(vals)
        ctx = WhileContext(g, outer, frame, parallel_iterations)
        with g.control_flow_context(ctx):
            enters = [g.create_op("Enter", [v], {"frame_name": frame, "is_constant": 0,
                                                 "parallel_iterations": parallel_iterations},
                                  domain=D, name="enter", in_context=False) for v in vals]
            for e in enters:
                e.cf_context = ctx
                ctx.nodes.append(e)
            merges = [g.create_op("Merge", [e.outputs[0], e.outputs[0]], {}, domain=D, name="merge") for e in enters]
            for i, (m, invariant) in enumerate(zip(merges, invariants)):
                if invariant is not _KEEP:
                    _relax_to_invariant(name, i, m.outputs[0], invariant)
            merged = [m.outputs[0] for m in merges]
            ctx.pivot = merged[0]
            pred = convert_to_tensor(cond_fn(*merged[:-1]))
            if pred.dtype != np.dtype(bool):
                raise GraphError(f"while_loop {name!r}: cond must return a bool tensor, got {pred.dtype}")
            loop_cond = g.create_op("LoopCond", [pred], {}, domain=D, name="loop_cond")
            lc = loop_cond.outputs[0]
            switches = [g.create_op("Switch", [m, lc], {}, domain=D, name="switch") for m in merged]
            body_in = [g.create_op("Identity", [s.outputs[1]], {}, name="body_in").outputs[0] for s in switches]
            ctx.pivot = body_in[0]
            tag = next_stack_tag()
            pushes = [g.create_op("StackPush", [b], {"stack_name": f"{frame}#{tag}/{i}"}, domain=D,
                                  name="history") for i, b in enumerate(body_in[:-1])] if differentiable else []
            pushed = [p.outputs[0] for p in pushes] if differentiable else body_in[:-1]
            body_start = len(ctx.nodes)
            outs = list(body_fn(*pushed))
            body_nodes = [nd for nd in ctx.nodes[body_start:] if nd.op_type != "Enter"]
            outs = [in_frame(ctx, convert_to_tensor(o)) for o in outs]
            if len(outs) != n - 1:
                raise GraphError(f"while_loop {name!r}: body returns {len(outs)} values for {n - 1} loop variables")
            from trainer.ops import add

            one = constant(np.asarray(1, np.int64), name="one")
            # The counter advances only after this iteration's pushes, so the gradient loop (which
            # needs the final count) can never read a stack before the forward loop filled it.
            with g.control_dependencies(pushes):
                outs.append(add(body_in[-1], one))
            counter_inc = outs[-1].node
            nexts = []
            for i, (o, m) in enumerate(zip(outs, merges)):
                if o.dtype != m.outputs[0].dtype:
                    raise GraphError(f"while_loop {name!r}: loop variable {i} enters as {m.outputs[0].dtype} "
                                     f"but the body returns {o.dtype}")
                _check_invariant(name, i, m.outputs[0], o)
                nxt = g.create_op("NextIteration", [o], {}, domain=D, name="next_iteration")
                m.inputs[1] = nxt.outputs[0]  # the back edge
                nexts.append(nxt)
        exits = []
        with g.control_flow_context(ctx):
            for s in switches:
                e = g.create_op("Exit", [s.outputs[0]], {}, domain=D, name="exit", in_context=False)
                e.cf_context = outer
                if outer is not None:
                    outer.nodes.append(e)
                exits.append(e)
        record = WhileLoop(ctx, enters, merges, switches, exits, nexts, loop_cond, body_in, outs, n - 1,
                           cond_fn, body_fn, pushes)
        record.body_nodes = body_nodes
        record.counter_inc = counter_inc
        for e in exits:
            e.while_loop = record
        g.loops.append(record)
        return [e.outputs[0] for e in exits[:-1]]


def _relax_to_invariant(name, i, merged: Tensor, invariant: tuple | None) -> None:
    """The loop variable's shape inside the loop is its invariant, which the entering value must fit."""
    if not shapes_compatible(merged.shape, invariant):
        raise ValueError(f"while_loop {name!r}: loop variable {i} enters the loop with shape {merged.shape}, "
                         f"which does not fit its shape invariant {invariant}")
    merged.type = TensorType(merged.type.dtype, invariant)


def _check_invariant(name, i, entered: Tensor, returned: Tensor) -> None:
    a, b = entered.shape, returned.shape
    if not shapes_compatible(a, b):
        raise GraphError(f"while_loop {name!r}: loop variable {i} enters the loop with shape {a} but has shape "
                         f"{b} after one iteration; to let its shape vary, give while_loop a less specific "
                         f"shape in shape_invariants")
