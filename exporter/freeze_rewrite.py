"""The freeze's graph rewrite: trainer tensors to an IR graph, walking back from the outputs.

Each op's treatment is one row of ``RULES``: what it reads (and what inference refuses to
compute) and how it is built (an alias, a constant, a Loop or If with subgraphs, or IR nodes from
a lowering in ``exporter.freeze_lowering``); an op without a row is kept as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from exporter import ir
from exporter.freeze_lowering import (
    LSTM_TRAINING_OUTPUTS,
    Scope,
    contiguous,
    ir_value,
    lower_batch_norm,
    lower_fill_like,
    lower_lstm_block_cell,
    lower_lstm_block_fused,
    lower_same_op,
)
from exporter.freeze_source import TRAINER_DOMAIN, FreezeError, FreezeSource
from schemas import dtypes
from schemas.registry import get_schema

__all__ = ["Freezer", "OpRule", "RULES", "rule_for"]

PRODUCER = "flowstack trainer"


class Freezer:
    """Builds the IR on demand, walking back from the outputs: only what they read is converted.

    A while_loop is met at its Exits and becomes one ONNX ``Loop`` whose body computes the next
    loop variables and then the condition on them (the first test runs in the enclosing graph); a
    cond is met at its Merges and becomes one ``If``. Tensors a body or branch reads from outside
    come in through Enter / Switch, which are named as the outside value: an outer capture.
    """

    def __init__(self, src: FreezeSource, inputs: dict, outputs: dict):
        self.src = src
        self.inputs = inputs
        self.outputs = outputs
        g = src.graph
        loops = [loop.to_dict() for loop in g.loops] + list(getattr(g, "imported_loops", []))
        conds = list(g.conds) + list(getattr(g, "imported_conds", []))
        self.loops = {name: rec for rec in loops for name in rec["exits"]}
        self.conds = {name: rec for rec in conds for name in rec["merges"]}
        self.used: set[str] = set(inputs) | set(outputs)
        self.current = ""  # the public output being built, for error messages

    def fresh(self, hint: str) -> str:
        name = ir.unused_name(hint, self.used)
        self.used.add(name)
        return name

    def model(self) -> ir.Model:
        main = Scope(ir.Graph(name="main"))
        g = main.graph
        for public, t in self.inputs.items():
            main.names[t] = public
            g.inputs.append(public)
            g.values[public] = ir_value(public, t)
        for public, t in self.outputs.items():
            self.current = public
            name = self.emit(t, main)
            produced = {o for n in g.nodes for o in n.outputs}
            if name not in produced or name in g.outputs or name in g.inputs:
                g.nodes.append(ir.Node("Identity", [name], [public], name=public))
            else:
                self._rename(main, name, public)
            g.values[public] = ir_value(public, t)
            g.outputs.append(public)
        signature = ir.Signature({p: p for p in self.inputs}, {p: p for p in self.outputs})
        return ir.Model(g, opset_imports={"": 21}, producer=PRODUCER, signatures={"serving_default": signature})

    # -- the walk -----------------------------------------------------------------------------
    def emit(self, target, scope: Scope) -> str:
        """The IR name of trainer tensor ``target`` in ``scope``, converting what it needs first.

        A depth-first walk without recursion (graphs run to many thousands of ops): a tensor is
        built once all it reads are; one that reads a tensor whose own reads are still being
        walked closes a cycle, which only a corrupt graph has."""
        stack, walking = [target], set()
        while stack:
            t = stack[-1]
            if t in scope.names:
                stack.pop()
                continue
            missing = [d for d in self.reads(t) if d not in scope.names]
            if not missing:
                stack.pop()
                walking.discard(t)
                rule_for(t.node).build(self, t, scope)
                continue
            looped = next((d for d in missing if d in walking), None)
            if looped is not None:
                raise FreezeError(f"output {self.current!r}: the graph has a cycle: {looped.name} reads itself "
                                  f"through {t.name}")
            walking.add(t)
            stack.extend(missing)
        return scope.names[target]

    def reads(self, t) -> list:
        """The trainer tensors ``t`` is built from (refusing what inference cannot compute)."""
        return rule_for(t.node).reads(self, t)

    def constant(self, scope: Scope, t, data: np.ndarray) -> None:
        scope.names[t] = name = self.fresh(t.name)
        scope.graph.values[name] = ir.Value(name, data=contiguous(data))

    def variable_value(self, name: str) -> np.ndarray:
        if name not in self.src.values:
            raise FreezeError(f"variable {name!r} has no value: run its initializer (or restore a checkpoint) before freezing")
        return self.src.values[name]

    def build_loop(self, rec: dict, scope: Scope) -> None:
        """The while_loop ``rec`` as one ONNX Loop in ``scope``."""
        g = self.src.graph
        frame = rec["frame_name"]
        initial = [scope.names[g.node(e).inputs[0]] for e in rec["enters"]]
        merged = [g.node(m).outputs[0] for m in rec["merges"]]
        captures = {g.tensor(enter): scope.names[g.tensor(outer)] for outer, enter in rec["captured"].items()}
        pred = g.node(rec["loop_cond"]).inputs[0]
        # The first test, in the enclosing graph, on the initial values.
        first = Scope(scope.graph, {**scope.names, **captures, **dict(zip(merged, initial))})
        cond0 = self.emit(pred, first)
        for t, name in first.names.items():
            scope.names.setdefault(t, name)
        # The body: next values from this iteration's, then the test on the next values.
        body = ir.Graph(name=self.fresh(f"{frame}/body"))
        inner = Scope(body, captures)
        iteration, cond_in = self.fresh(f"{frame}/iteration"), self.fresh(f"{frame}/cond_in")
        body.values[iteration] = ir.Value(iteration, dtypes.INT64, ())
        body.values[cond_in] = ir.Value(cond_in, dtypes.BOOL, ())
        body.inputs = [iteration, cond_in]
        for name in rec["body_inputs"]:
            t = g.tensor(name)
            inner.names[t] = v = self.fresh(name)
            body.values[v] = ir_value(v, t)
            body.inputs.append(v)
        nexts = [self.emit(g.tensor(name), inner) for name in rec["body_outputs"]]
        test = Scope(body, {**inner.names, **dict(zip(merged, nexts))})
        body.outputs = self._produced(body, [self.emit(pred, test)] + nexts)
        outs = self._bind_outputs(scope, rec["exits"])
        scope.graph.nodes.append(ir.Node("Loop", ["", cond0] + initial, outs, {"body": body}, name=frame))

    def build_cond(self, rec: dict, scope: Scope) -> None:
        """The cond ``rec`` as one ONNX If in ``scope``."""
        g = self.src.graph
        branches = {}
        for key, attr in (("true", "then_branch"), ("false", "else_branch")):
            sub = ir.Graph(name=self.fresh(f"{rec['merges'][0]}/{key}"))
            seeds = {g.tensor(sw): scope.names[g.tensor(outer)] for outer, sw in rec[f"{key}_inputs"].items()}
            inner = Scope(sub, seeds)
            sub.outputs = self._produced(sub, [self.emit(g.tensor(n), inner) for n in rec[f"{key}_outputs"]])
            branches[attr] = sub
        outs = self._bind_outputs(scope, rec["merges"])
        pred = scope.names[g.tensor(rec["pred"])]
        scope.graph.nodes.append(ir.Node("If", [pred], outs, branches, name=rec["merges"][0].rsplit("/", 1)[0]))

    def _bind_outputs(self, scope: Scope, node_names: list[str]) -> list[str]:
        """Fresh names in ``scope`` for the first outputs of ``node_names`` (a Loop's exits, an If's merges)."""
        outs = []
        for node_name in node_names:
            t = self.src.graph.node(node_name).outputs[0]
            scope.names[t] = name = self.fresh(t.name)
            scope.graph.values[name] = ir_value(name, t)
            outs.append(name)
        return outs

    def _produced(self, graph: ir.Graph, names: list[str]) -> list[str]:
        """Subgraph outputs, each made by a node of the subgraph and listed once (an Identity where not)."""
        made = {o for n in graph.nodes for o in n.outputs}
        out: list[str] = []
        for name in names:
            if name not in made or name in out:
                copy = self.fresh(f"{name}/out")
                graph.nodes.append(ir.Node("Identity", [name], [copy], name=copy))
                source = graph.values.get(name)
                graph.values[copy] = ir.Value(copy, source.dtype if source else None, source.shape if source else None)
                name = copy
            out.append(name)
        return out

    def _rename(self, scope: Scope, old: str, new: str) -> None:
        from exporter.passes.graph_edit import rename_value

        rename_value(scope.graph, old, new)
        for t, name in scope.names.items():
            if name == old:
                scope.names[t] = new


def is_dropout(node) -> bool:
    return node.op_type == "Mul" and node.domain == "" and any(
        t is not None and t.node.op_type == "DropoutMask" and t.node.domain == TRAINER_DOMAIN for t in node.inputs)


def dropped_operand(node):
    return next(t for t in node.inputs if t.node.op_type != "DropoutMask")


# -- what each op reads and becomes -----------------------------------------------------------------
def all_inputs(freezer: Freezer, t) -> list:
    return [i for i in t.node.inputs if i is not None]


def lowered(lowering: Callable) -> Callable:
    """A build naming the node's outputs afresh and adding the IR nodes ``lowering`` returns."""

    def build(freezer: Freezer, t, scope: Scope) -> None:
        node = t.node
        ins = [scope.names[i] if i is not None else "" for i in node.inputs]
        outs = []
        for out in node.outputs:
            scope.names[out] = name = freezer.fresh(out.name)
            scope.graph.values[name] = ir_value(name, out)
            outs.append(name)
        scope.graph.nodes.extend(lowering(freezer, node, ins, outs, scope))

    return build


@dataclass(frozen=True)
class OpRule:
    """How the freezer treats one op: ``reads(freezer, t)`` lists the tensors ``t`` is built from
    (or raises ``FreezeError``), ``build(freezer, t, scope)`` names ``t`` in ``scope``."""

    reads: Callable = all_inputs
    build: Callable = lowered(lower_same_op)


def refuse_placeholder(freezer: Freezer, t) -> list:
    name = t.node.name
    raise FreezeError(f"output {freezer.current!r} depends on placeholder {name!r}, which is not among the inputs; "
                      f"add it to the inputs (e.g. --inputs {name}) or export an output that does not need it")


def refuse_control_flow(freezer: Freezer, t) -> list:
    node = t.node
    raise FreezeError(
        f"output {freezer.current!r} reads {node.op_type} node {node.name!r} of a while_loop or cond from outside "
        "its structure (not through the loop's exits or the cond's merges); export the loop's or cond's results")


def loop_reads(freezer: Freezer, t) -> list:
    """A loop's Exit reads the loop's initial values and what its body captures."""
    if t.node.name not in freezer.loops:
        return refuse_control_flow(freezer, t)
    rec, g = freezer.loops[t.node.name], freezer.src.graph
    return [g.node(e).inputs[0] for e in rec["enters"]] + [g.tensor(n) for n in rec["captured"]]


def cond_reads(freezer: Freezer, t) -> list:
    """A cond's Merge reads the predicate and what either branch reads from outside."""
    if t.node.name not in freezer.conds:
        return refuse_control_flow(freezer, t)
    if t.index != 0:
        raise FreezeError(f"output {freezer.current!r} reads {t.name}, which branch a cond took; export its value instead")
    rec, g = freezer.conds[t.node.name], freezer.src.graph
    return [g.tensor(rec["pred"])] + [g.tensor(n) for n in {**rec["false_inputs"], **rec["true_inputs"]}]


def first_three_inputs(freezer: Freezer, t) -> list:
    return [i for i in t.node.inputs[:3] if i is not None]


def batch_norm_reads(freezer: Freezer, t) -> list:
    """x, gamma and beta: the moving statistics replace the batch's."""
    if t.index > 0:
        raise FreezeError(f"output {freezer.current!r} reads the batch statistics {t.name} of BatchNormTraining node "
                          f"{t.node.name!r}, which inference does not compute; export its normalized output")
    return first_three_inputs(freezer, t)


def lstm_reads(freezer: Freezer, t) -> list:
    node = t.node
    first_saved, instead = LSTM_TRAINING_OUTPUTS[node.op_type]
    if t.index >= first_saved:
        saved = get_schema(node.op_type, node.domain).outputs[t.index].name
        raise FreezeError(f"output {freezer.current!r} reads {t.name} ({saved}), which {node.op_type} node "
                          f"{node.name!r} saves for its gradient, kept for training only; export {instead}")
    return all_inputs(freezer, t)


def mul_reads(freezer: Freezer, t) -> list:
    """``x * DropoutMask(x)`` reads only ``x``: inference drops nothing."""
    return [dropped_operand(t.node)] if is_dropout(t.node) else all_inputs(freezer, t)


def build_mul(freezer: Freezer, t, scope: Scope) -> None:
    if is_dropout(t.node):
        scope.names[t] = scope.names[dropped_operand(t.node)]
    else:
        lowered(lower_same_op)(freezer, t, scope)


def build_as_first_input(freezer: Freezer, t, scope: Scope) -> None:
    scope.names[t] = scope.names[t.node.inputs[0]]


def build_variable(freezer: Freezer, t, scope: Scope) -> None:
    freezer.constant(scope, t, freezer.variable_value(t.node.name))


def build_constant(freezer: Freezer, t, scope: Scope) -> None:
    freezer.constant(scope, t, t.node.attrs["value"])


def build_loop(freezer: Freezer, t, scope: Scope) -> None:
    freezer.build_loop(freezer.loops[t.node.name], scope)


def build_cond(freezer: Freezer, t, scope: Scope) -> None:
    freezer.build_cond(freezer.conds[t.node.name], scope)


RULES: dict[tuple[str, str], OpRule] = {
    (TRAINER_DOMAIN, "Placeholder"): OpRule(reads=refuse_placeholder),
    (TRAINER_DOMAIN, "Variable"): OpRule(build=build_variable),
    ("", "Constant"): OpRule(build=build_constant),
    ("", "Mul"): OpRule(reads=mul_reads, build=build_mul),
    (TRAINER_DOMAIN, "StackPush"): OpRule(reads=first_three_inputs, build=build_as_first_input),
    (TRAINER_DOMAIN, "Exit"): OpRule(reads=loop_reads, build=build_loop),
    (TRAINER_DOMAIN, "Merge"): OpRule(reads=cond_reads, build=build_cond),
    (TRAINER_DOMAIN, "Switch"): OpRule(reads=refuse_control_flow),
    (TRAINER_DOMAIN, "Enter"): OpRule(reads=refuse_control_flow),
    (TRAINER_DOMAIN, "NextIteration"): OpRule(reads=refuse_control_flow),
    (TRAINER_DOMAIN, "LoopCond"): OpRule(reads=refuse_control_flow),
    (TRAINER_DOMAIN, "BatchNormTraining"): OpRule(reads=batch_norm_reads, build=lowered(lower_batch_norm)),
    (TRAINER_DOMAIN, "LSTMBlockCell"): OpRule(reads=lstm_reads, build=lowered(lower_lstm_block_cell)),
    (TRAINER_DOMAIN, "LSTMBlockFused"): OpRule(reads=lstm_reads, build=lowered(lower_lstm_block_fused)),
    (TRAINER_DOMAIN, "OnesLike"): OpRule(build=lowered(lower_fill_like)),
    (TRAINER_DOMAIN, "ZerosLike"): OpRule(build=lowered(lower_fill_like)),
}
KEPT_AS_IS = OpRule()


def rule_for(node) -> OpRule:
    return RULES.get((node.domain, node.op_type), KEPT_AS_IS)
