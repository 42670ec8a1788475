"""Freeze: a trained graph plus chosen inputs and outputs becomes a self-contained inference model.

    model = freeze(sess, inputs={"image": x}, outputs={"probs": probs})        # a live session
    model = freeze("/tmp/digits", inputs={"image": "images:0"}, outputs={"probs": "probabilities:0"})

Only what the outputs need is kept (optimizers, savers, queues, summaries and gradient ops fall
away with everything else the outputs do not read); variables become constants holding their
current values (from the session, or the newest checkpoint of a directory, whose graph.npz
supplies the graph); training-mode ops become inference-mode ones: ``x * DropoutMask(x)`` is
``x``, ``BatchNormTraining`` is ``BatchNormalization`` over its scope's ``moving_mean`` and
``moving_variance``, ``LSTMBlockCell`` is spelled in ONNX ops and ``LSTMBlockFused`` becomes an
ONNX ``LSTM``; each ``while_loop`` becomes an ONNX ``Loop`` and each ``cond`` an ``If``, with
subgraphs. What cannot be frozen is refused with a ``FreezeError`` naming the tensor, file or op
and what to do about it.

``check_trainer_parity`` runs the trainer itself (in inference mode) and the frozen or optimized
model on the edge runtime over the same inputs, so an export is checked against the trainer's
own outputs, not against another rewrite of them.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from exporter import flow_writer, ir
from exporter.verify import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    ParityError,
    ParityReport,
)
from schemas import dtypes
from schemas.registry import get_schema, qualified_name

TRAINER_DOMAIN = "flowstack"
PRODUCER = "flowstack trainer"

# Dataflow control-flow ops: only met through a loop's Exits or a cond's Merges (see _Freezer).
_CONTROL_FLOW = {"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"}


class FreezeError(ValueError):
    """A graph, checkpoint or signature that cannot become an inference model; says what and why."""


@dataclass
class _Source:
    graph: Any  # trainer.Graph
    values: dict[str, np.ndarray]  # variable name -> value
    session: Any  # trainer.Session with the values loaded (for the trainer-side parity run)
    origin: str  # what was frozen, for the metadata
    step: int | None


def freeze(
    source,
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
    *,
    descriptions: Mapping[str, str] | None = None,
    labels: list[str] | None = None,
) -> ir.Model:
    """Freeze ``source`` (a ``trainer.Session`` or a checkpoint directory) into an ``ir.Model``.

    ``inputs`` and ``outputs`` map public names (the ``serving_default`` signature) to tensors or
    tensor names (``"node:0"``, or ``"node"`` for output 0). ``descriptions`` (public name ->
    text) and ``labels`` (class names, in output order) go into the model's metadata.
    """
    src = _open(source)
    model = _Freezer(src, _resolve_all(src.graph, inputs, "input"), _resolve_all(src.graph, outputs, "output")).model()
    model.metadata.update(_metadata(src, model, descriptions or {}, labels))
    # What the passes start from, for `flowstack inspect` to set the written file against.
    model.metadata["frozen_size"] = str(len(flow_writer.to_bytes(model)))
    return model


def check_trainer_parity(
    model: ir.Model,
    source,
    samples: Mapping[str, np.ndarray] | list[Mapping[str, np.ndarray]],
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
) -> ParityReport:
    """Compare ``model`` on the edge runtime with the trainer's own outputs on ``samples``.

    The trainer runs in inference mode: each dropout mask is fed as ones and each training-mode
    batch norm output is fed as the moving-statistics normalization of its input, in graph order.
    Raises ``ParityError`` naming the output over tolerance.
    """
    import edge_runtime
    from exporter.verify import _compare

    src = _open(source)
    feeds_in = _resolve_all(src.graph, inputs, "input")
    fetches = _resolve_all(src.graph, outputs, "output")
    runtime = edge_runtime.load(flow_writer.to_bytes(model))
    report = ParityReport(samples=0, rtol=rtol, atol=atol)
    for sample in [samples] if isinstance(samples, Mapping) else list(samples):
        report.samples += 1
        expected = _trainer_outputs(src, {feeds_in[k]: v for k, v in sample.items()}, fetches)
        actual = runtime.run(dict(sample))
        for name, want in expected.items():
            report.record(_compare(name, want, actual[name], rtol, atol))
    if not report.ok:
        bad = next(d for d in report.outputs.values() if not d.within)
        raise ParityError(f"exported model diverges from the trainer at output {bad.name!r}: max abs diff "
                          f"{bad.max_abs:.3g}, max rel diff {bad.max_rel:.3g}\n{report}", report)
    return report


def export_trained(
    source,
    destination,
    inputs: Mapping[str, Any],
    outputs: Mapping[str, Any],
    *,
    optimize_graph: bool = True,
    verify: bool = True,
    samples: Mapping[str, np.ndarray] | list[Mapping[str, np.ndarray]] | None = None,
    verbose: bool = False,
    descriptions: Mapping[str, str] | None = None,
    labels: list[str] | None = None,
    quantization=None,
):
    """Freeze, check against the trainer, optimize, check against the frozen graph, write ``destination``.

    The chain of checks is trainer == frozen graph on the edge runtime (``check_trainer_parity``)
    and frozen == optimized (``exporter.verify.check_parity``, which names the first diverging
    tensor). Nothing is written unless both hold. Returns the pipeline's ``ExportReport`` with
    ``trainer_parity`` (a ParityReport, None without ``verify``) and ``frozen`` (the model before
    the passes, for ``to_onnx`` or comparisons) added.
    """
    from exporter.pipeline import export
    from exporter.verify import sample_inputs

    src = _open(source)
    frozen = freeze(src, inputs, outputs, descriptions=descriptions, labels=labels)
    trainer_parity = None
    if verify:
        if samples is None:
            samples = sample_inputs(frozen)
        trainer_parity = check_trainer_parity(frozen, src, samples, inputs, outputs)
    report = export(frozen, destination, optimize_graph=optimize_graph, verify=verify, samples=samples, verbose=verbose,
                    quantization=quantization)
    report.trainer_parity = trainer_parity
    report.frozen = frozen
    return report


def trainer_outputs(source, feeds: Mapping[str, np.ndarray], inputs: Mapping[str, Any],
                    outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The trainer's own outputs in inference mode (see ``check_trainer_parity``), by public name."""
    src = _open(source)
    feeds_in = _resolve_all(src.graph, inputs, "input")
    return _trainer_outputs(src, {feeds_in[k]: v for k, v in feeds.items()}, _resolve_all(src.graph, outputs, "output"))


# -- sources ----------------------------------------------------------------------------------------
def _open(source) -> _Source:
    import trainer

    if isinstance(source, _Source):
        return source
    if isinstance(source, trainer.Session):
        step = _global_step(source.graph, source.variable_values())
        return _Source(source.graph, source.variable_values(), source, "session", step)
    return _open_checkpoint_dir(os.fspath(source))


def _open_checkpoint_dir(directory: str) -> _Source:
    import trainer
    from trainer.saved_slices import shard_values
    from trainer.saver import GRAPH_FILE, STATE_FILE, CheckpointError, load_checkpoint

    if not os.path.isdir(directory):
        raise FreezeError(f"{directory}: no such checkpoint directory")
    graph_path = os.path.join(directory, GRAPH_FILE)
    if not os.path.exists(graph_path):
        raise FreezeError(f"{graph_path}: missing; the checkpoint directory has no graph. "
                          "Save with Saver.save(..., write_graph=True) (the default) or freeze the live session")
    state_path = os.path.join(directory, STATE_FILE)
    try:
        with open(state_path) as f:
            newest = json.load(f)["model_checkpoint_path"]
    except (OSError, ValueError, KeyError) as exc:
        raise FreezeError(f"{state_path}: missing or unreadable ({exc}); it names the newest checkpoint. "
                          "Save a checkpoint into the directory first") from None
    path = newest if os.path.exists(newest) else os.path.join(directory, os.path.basename(newest))
    if not os.path.exists(path):
        raise FreezeError(f"checkpoint shard {newest!r} named by {state_path} is missing; restore the file, "
                          "or point the checkpoint file at a checkpoint that exists")
    _check_archive(path, state_path)
    try:
        graph = trainer.import_graph(graph_path)
    except Exception as exc:
        raise FreezeError(f"{graph_path}: corrupt or unreadable graph ({type(exc).__name__}: {exc}); "
                          "save the graph again (Saver.save writes it)") from None
    try:
        meta, values = load_checkpoint(path)
        values = shard_values(meta, values)  # a partitioned variable is saved whole, by its logical name
    except CheckpointError as exc:
        raise FreezeError(f"{exc}; the shard is corrupt: re-save it, or point {state_path} at an older checkpoint") from None
    missing = [v.name for v in trainer.global_variables(graph) if v.name not in values]
    if missing:
        raise FreezeError(f"checkpoint {path!r} lacks variable(s) {missing} that the graph has; "
                          "it was written by another graph")
    session = trainer.Session(graph, devices=["CPU:0"])
    variables = trainer.global_variables(graph)
    session.run([v.initializer for v in variables], {v.initial_value: values[v.name] for v in variables})
    match = re.search(r"-(\d+)\.ckpt$", path)
    step = _global_step(graph, values)
    return _Source(graph, values, session, path, step if step is not None else (int(match.group(1)) if match else None))


def _check_archive(path: str, state_path: str) -> None:
    """A checkpoint shard is a zip archive; test it whole before NumPy reads it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (OSError, zipfile.BadZipFile) as exc:
        bad = str(exc)
    if bad is not None:
        raise FreezeError(f"checkpoint shard {path!r} is corrupt ({bad}): re-save it, or point {state_path} "
                          "at an older checkpoint")


def _global_step(graph, values) -> int | None:
    from trainer.graph import GraphKeys

    steps = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if steps and steps[0].name in values:
        return int(values[steps[0].name])
    return None


def _resolve_all(graph, tensors: Mapping[str, Any], role: str) -> dict:
    if not tensors:
        raise FreezeError(f"no {role}s given: name at least one, as {{public_name: tensor or 'node:0'}}")
    return {public: _resolve(graph, t, public, role) for public, t in tensors.items()}


def _resolve(graph, t, public: str, role: str):
    from trainer import GraphError, Tensor

    if isinstance(t, Tensor):
        return t
    if hasattr(t, "_as_tensor"):
        return t._as_tensor()
    try:
        return graph.tensor(str(t))
    except GraphError as exc:
        near = [n.name for n in graph.nodes if n.op_type == "Placeholder"] if role == "input" else []
        hint = f" (placeholders: {', '.join(near)})" if near else ""
        raise FreezeError(f"{role} {public!r}: {exc}{hint}") from None


# -- the rewrite ------------------------------------------------------------------------------------
class _Scope:
    """One IR graph being built (main, a Loop body, an If branch) and the trainer tensors named in it."""

    def __init__(self, graph: ir.Graph, names: dict | None = None):
        self.graph = graph
        self.names: dict = dict(names or {})  # trainer Tensor -> IR value name


class _Freezer:
    """Builds the IR on demand, walking back from the outputs: only what they read is converted.

    A while_loop is met at its Exits and becomes one ONNX ``Loop`` whose body computes the next
    loop variables and then the condition on them (the first test runs in the enclosing graph); a
    cond is met at its Merges and becomes one ``If``. Tensors a body or branch reads from outside
    come in through Enter / Switch, which are named as the outside value: an outer capture.
    """

    def __init__(self, src: _Source, inputs: dict, outputs: dict):
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
        name, n = hint, 0
        while name in self.used:
            n += 1
            name = f"{hint}_{n}"
        self.used.add(name)
        return name

    def model(self) -> ir.Model:
        main = _Scope(ir.Graph(name="main"))
        g = main.graph
        for public, t in self.inputs.items():
            main.names[t] = public
            g.inputs.append(public)
            g.values[public] = _value(public, t)
        for public, t in self.outputs.items():
            self.current = public
            name = self.emit(t, main)
            produced = {o for n in g.nodes for o in n.outputs}
            if name not in produced or name in g.outputs or name in g.inputs:
                g.nodes.append(ir.Node("Identity", [name], [public], name=public))
            else:
                self._rename(main, name, public)
            g.values[public] = _value(public, t)
            g.outputs.append(public)
        signature = ir.Signature({p: p for p in self.inputs}, {p: p for p in self.outputs})
        return ir.Model(g, opset_imports={"": 21}, producer=PRODUCER, signatures={"serving_default": signature})

    # -- the walk -----------------------------------------------------------------------------
    def emit(self, target, scope: _Scope) -> str:
        """The IR name of trainer tensor ``target`` in ``scope``, converting what it needs first."""
        stack = [target]
        while stack:
            t = stack[-1]
            if t in scope.names:
                stack.pop()
                continue
            missing = [d for d in self._deps(t) if d not in scope.names]
            if missing:
                if len(stack) > 100_000:
                    raise FreezeError(f"output {self.current!r}: the graph behind {t.name} has a cycle")
                stack.extend(missing)
                continue
            stack.pop()
            self._build(t, scope)
        return scope.names[target]

    def _deps(self, t) -> list:
        node = t.node
        trainer_op = node.domain == TRAINER_DOMAIN
        if trainer_op and node.op_type == "Placeholder":
            raise FreezeError(
                f"output {self.current!r} depends on placeholder {node.name!r}, which is not among the inputs; "
                f"add it to the inputs (e.g. --inputs {node.name}) or export an output that does not need it")
        if _is_dropout(node):
            return [_dropped_operand(node)]
        if trainer_op and node.op_type == "Exit" and node.name in self.loops:
            rec = self.loops[node.name]
            g = self.src.graph
            return [g.node(e).inputs[0] for e in rec["enters"]] + [g.tensor(n) for n in rec["captured"]]
        if trainer_op and node.op_type == "Merge" and node.name in self.conds:
            rec = self.conds[node.name]
            if t.index != 0:
                raise FreezeError(f"output {self.current!r} reads {t.name}, which branch a cond took; export its value instead")
            g = self.src.graph
            return [g.tensor(rec["pred"])] + [g.tensor(n) for n in {**rec["false_inputs"], **rec["true_inputs"]}]
        if trainer_op and node.op_type in _CONTROL_FLOW:
            raise FreezeError(
                f"output {self.current!r} reads {node.op_type} node {node.name!r} of a while_loop or cond from outside "
                "its structure (not through the loop's exits or the cond's merges); export the loop's or cond's results")
        if trainer_op and node.op_type == "BatchNormTraining" and t.index > 0:
            raise FreezeError(f"output {self.current!r} reads the batch statistics {t.name} of BatchNormTraining node "
                              f"{node.name!r}, which inference does not compute; export its normalized output")
        if trainer_op and node.op_type in _LSTM_OPS and t.index >= _LSTM_OPS[node.op_type][0]:
            saved = get_schema(node.op_type, node.domain).outputs[t.index].name
            raise FreezeError(f"output {self.current!r} reads {t.name} ({saved}), which {node.op_type} node "
                              f"{node.name!r} saves for its gradient, kept for training only; "
                              f"export {_LSTM_OPS[node.op_type][1]}")
        if trainer_op and node.op_type in ("StackPush", "BatchNormTraining"):
            return [i for i in node.inputs[:3] if i is not None]
        return [i for i in node.inputs if i is not None]

    def _build(self, t, scope: _Scope) -> None:
        node = t.node
        op = node.op_type if node.domain in ("", TRAINER_DOMAIN) else None
        trainer_op = node.domain == TRAINER_DOMAIN
        if _is_dropout(node):
            scope.names[t] = scope.names[_dropped_operand(node)]
        elif trainer_op and op == "StackPush":
            scope.names[t] = scope.names[node.inputs[0]]
        elif trainer_op and op == "Variable":
            self._constant(scope, t, self._variable(node.name))
        elif not trainer_op and op == "Constant":
            self._constant(scope, t, node.attrs["value"])
        elif trainer_op and op == "Exit":
            self._loop(self.loops[node.name], scope)
        elif trainer_op and op == "Merge":
            self._cond(self.conds[node.name], scope)
        else:
            ins = [scope.names[i] if i is not None else "" for i in node.inputs]
            outs = []
            for out in node.outputs:
                scope.names[out] = name = self.fresh(out.name)
                scope.graph.values[name] = _value(name, out)
                outs.append(name)
            scope.graph.nodes.extend(self._nodes(node, ins, outs, scope))

    def _nodes(self, node, ins: list[str], outs: list[str], scope: _Scope) -> list[ir.Node]:
        """The IR node(s) computing trainer ``node`` at inference."""
        if node.domain == TRAINER_DOMAIN and node.op_type == "BatchNormTraining":
            return [self._batch_norm(node, ins, outs, scope)]
        if node.domain == TRAINER_DOMAIN and node.op_type in _LSTM_OPS:
            return _LSTM_OPS[node.op_type][2](self, node, ins, outs, scope)
        if node.domain == TRAINER_DOMAIN and node.op_type in ("OnesLike", "ZerosLike"):
            fill = np.ones if node.op_type == "OnesLike" else np.zeros
            shape = self.fresh(f"{node.name}/shape")
            return [ir.Node("Shape", ins[:1], [shape], name=shape),
                    ir.Node("ConstantOfShape", [shape], outs[:1], {"value": fill((1,), node.outputs[0].dtype)}, name=node.name)]
        _check_edge_kernel(node)
        attrs = {k: v for k, v in node.attrs.items() if v is not None}
        return [ir.Node(node.op_type, ins, outs, attrs, name=node.name, domain=node.domain)]

    def _constant(self, scope: _Scope, t, data: np.ndarray) -> None:
        scope.names[t] = name = self.fresh(t.name)
        scope.graph.values[name] = ir.Value(name, data=_contiguous(data))

    def _variable(self, name: str) -> np.ndarray:
        if name not in self.src.values:
            raise FreezeError(f"variable {name!r} has no value: run its initializer (or restore a checkpoint) before freezing")
        return self.src.values[name]

    def _batch_norm(self, node, ins, outs, scope: _Scope) -> ir.Node:
        prefix = node.name.rsplit("/", 1)[0] + "/" if "/" in node.name else ""
        stats = []
        for stat in ("moving_mean", "moving_variance"):
            var = prefix + stat
            if var not in self.src.values:
                raise FreezeError(f"node {node.name!r} (BatchNormTraining): no variable {var!r} with its moving "
                                  "statistics; build batch norm with trainer.layers.batch_normalization")
            name = self.fresh(var + ":0")
            scope.graph.values[name] = ir.Value(name, data=_contiguous(self.src.values[var]))
            stats.append(name)
        for extra in outs[1:]:
            scope.graph.values.pop(extra, None)
        return ir.Node("BatchNormalization", ins[:3] + stats, outs[:1], {"epsilon": float(node.attrs["epsilon"])},
                       name=node.name)

    # -- control flow ---------------------------------------------------------------------------
    def _loop(self, rec: dict, scope: _Scope) -> None:
        g = self.src.graph
        frame = rec["frame_name"]
        initial = [scope.names[g.node(e).inputs[0]] for e in rec["enters"]]
        merged = [g.node(m).outputs[0] for m in rec["merges"]]
        captures = {g.tensor(enter): scope.names[g.tensor(outer)] for outer, enter in rec["captured"].items()}
        pred = g.node(rec["loop_cond"]).inputs[0]
        # The first test, in the enclosing graph, on the initial values.
        first = _Scope(scope.graph, {**scope.names, **captures, **dict(zip(merged, initial))})
        cond0 = self.emit(pred, first)
        for t, name in first.names.items():
            scope.names.setdefault(t, name)
        # The body: next values from this iteration's, then the test on the next values.
        body = ir.Graph(name=self.fresh(f"{frame}/body"))
        inner = _Scope(body, captures)
        iteration, cond_in = self.fresh(f"{frame}/iteration"), self.fresh(f"{frame}/cond_in")
        body.values[iteration] = ir.Value(iteration, dtypes.INT64, ())
        body.values[cond_in] = ir.Value(cond_in, dtypes.BOOL, ())
        body.inputs = [iteration, cond_in]
        for name in rec["body_inputs"]:
            t = g.tensor(name)
            inner.names[t] = v = self.fresh(name)
            body.values[v] = _value(v, t)
            body.inputs.append(v)
        nexts = [self.emit(g.tensor(name), inner) for name in rec["body_outputs"]]
        test = _Scope(body, {**inner.names, **dict(zip(merged, nexts))})
        body.outputs = self._produced(body, [self.emit(pred, test)] + nexts)
        outs = self._bind_outputs(scope, rec["exits"])
        scope.graph.nodes.append(ir.Node("Loop", ["", cond0] + initial, outs, {"body": body}, name=frame))

    def _cond(self, rec: dict, scope: _Scope) -> None:
        g = self.src.graph
        branches = {}
        for key, attr in (("true", "then_branch"), ("false", "else_branch")):
            sub = ir.Graph(name=self.fresh(f"{rec['merges'][0]}/{key}"))
            seeds = {g.tensor(sw): scope.names[g.tensor(outer)] for outer, sw in rec[f"{key}_inputs"].items()}
            inner = _Scope(sub, seeds)
            sub.outputs = self._produced(sub, [self.emit(g.tensor(n), inner) for n in rec[f"{key}_outputs"]])
            branches[attr] = sub
        outs = self._bind_outputs(scope, rec["merges"])
        pred = scope.names[g.tensor(rec["pred"])]
        scope.graph.nodes.append(ir.Node("If", [pred], outs, branches, name=rec["merges"][0].rsplit("/", 1)[0]))

    def _bind_outputs(self, scope: _Scope, node_names: list[str]) -> list[str]:
        """Fresh names in ``scope`` for the first outputs of ``node_names`` (a Loop's exits, an If's merges)."""
        outs = []
        for node_name in node_names:
            t = self.src.graph.node(node_name).outputs[0]
            scope.names[t] = name = self.fresh(t.name)
            scope.graph.values[name] = _value(name, t)
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

    def _rename(self, scope: _Scope, old: str, new: str) -> None:
        from exporter.passes.graph_edit import rename_value

        rename_value(scope.graph, old, new)
        for t, name in scope.names.items():
            if name == old:
                scope.names[t] = new


def _is_dropout(node) -> bool:
    return node.op_type == "Mul" and node.domain == "" and any(
        t is not None and t.node.op_type == "DropoutMask" and t.node.domain == TRAINER_DOMAIN for t in node.inputs)


def _dropped_operand(node):
    return next(t for t in node.inputs if t.node.op_type != "DropoutMask")


def _check_edge_kernel(node) -> None:
    from edge_runtime.kernels import get_kernel, has_kernel

    # The registry is shared with the trainer's kernels; only those edge_runtime defines ship to devices.
    if not has_kernel(node.op_type, node.domain) or not get_kernel(node.op_type, node.domain).__module__.startswith("edge_runtime."):
        qual = qualified_name(node.op_type, node.domain)
        hint = ("it is a training-only op; export an output that does not depend on it"
                if node.domain == TRAINER_DOMAIN else "add an edge kernel for it in edge_runtime/kernels/")
        raise FreezeError(f"op {qual} (node {node.name!r}) has no edge runtime kernel, so the frozen model "
                          f"could not run on the edge: {hint}")


def _lstm_block_cell(freezer: _Freezer, node, ins, outs, scope: _Scope) -> list[ir.Node]:
    """LSTMBlockCell (trainer/kernels/recurrent.py) in ONNX ops: z = [x, h] @ W + b; i, f, g, o = split(z, 4);
    c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c')."""
    x, h, c, w, b = ins
    n = {k: freezer.fresh(f"{node.name}/{k}") for k in ("xh", "z", "zi", "zf", "zg", "zo", "i", "f", "g", "o", "fc", "ig", "tc")}
    h_out, c_out = outs[:2]

    def op(op_type, inputs, outputs, **attrs):
        return ir.Node(op_type, inputs, outputs, attrs, name=outputs[0])

    return [
        op("Concat", [x, h], [n["xh"]], axis=1),
        op("Gemm", [n["xh"], w, b], [n["z"]]),
        op("Split", [n["z"]], [n["zi"], n["zf"], n["zg"], n["zo"]], axis=1, num_outputs=4),
        op("Sigmoid", [n["zi"]], [n["i"]]),
        op("Sigmoid", [n["zf"]], [n["f"]]),
        op("Tanh", [n["zg"]], [n["g"]]),
        op("Sigmoid", [n["zo"]], [n["o"]]),
        op("Mul", [n["f"], c], [n["fc"]]),
        op("Mul", [n["i"], n["g"]], [n["ig"]]),
        op("Add", [n["fc"], n["ig"]], [c_out]),
        op("Tanh", [c_out], [n["tc"]]),
        op("Mul", [n["o"], n["tc"]], [h_out]),
    ]


# Our gates (LSTMBlockCell's column blocks of W: i, f, g, o) in ONNX LSTM's order (i, o, f, c).
_ONNX_LSTM_GATES = (0, 3, 1, 2)


def _lstm_block_fused(freezer: _Freezer, node, ins, outs, scope: _Scope) -> list[ir.Node]:
    """LSTMBlockFused as one ONNX LSTM: W [I + H, 4H] is transposed, its gate blocks put in ONNX's
    order and split into W (input rows) and R (recurrent rows); b (plus forget_bias) is Wb and Rb is
    zero; Y [T, 1, B, H] and the final states lose their direction axis. The weight reshuffle is
    ops on the weights, which constant folding turns into the ONNX weights."""
    x, h0, c0, w, b = ins
    shape = node.inputs[3].shape
    if shape is None or None in shape:
        raise FreezeError(f"LSTMBlockFused node {node.name!r}: its weights' shape {shape} is not known; "
                          "freeze a graph whose W is a variable")
    hidden = shape[1] // 4
    width = shape[0] - hidden
    dtype = node.inputs[3].dtype
    n = {k: freezer.fresh(f"{node.name}/{k}") for k in
         ("wt", "wt_onnx", "w_x", "w_r", "W", "R", "b_onnx", "b_fb", "b_flat", "B", "h0", "c0", "Y", "Y_h", "Y_c")}

    def const(key, value):
        name = freezer.fresh(f"{node.name}/{key}")
        scope.graph.values[name] = ir.Value(name, data=_contiguous(value))
        return name

    def op(op_type, inputs, outputs, **attrs):
        return ir.Node(op_type, inputs, outputs, attrs, name=outputs[0])

    rows = const("gate_rows", np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in _ONNX_LSTM_GATES]))
    axis0, axis1 = const("axis0", np.int64([0])), const("axis1", np.int64([1]))
    split = const("split", np.int64([width]))
    forget = np.zeros(4 * hidden, dtype)
    forget[2 * hidden:3 * hidden] = node.attrs["forget_bias"]  # ONNX's f block
    rb = np.zeros(4 * hidden, dtype)
    for extra in outs[3:]:
        scope.graph.values.pop(extra, None)
    y, h_n, c_n = outs[:3]
    return [
        op("Transpose", [w], [n["wt"]], perm=[1, 0]),
        op("Gather", [n["wt"], rows], [n["wt_onnx"]], axis=0),
        op("Slice", [n["wt_onnx"], const("start", np.int64([0])), split, axis1], [n["w_x"]]),
        op("Slice", [n["wt_onnx"], split, const("end", np.int64([width + hidden])), axis1], [n["w_r"]]),
        op("Unsqueeze", [n["w_x"], axis0], [n["W"]]),
        op("Unsqueeze", [n["w_r"], axis0], [n["R"]]),
        op("Gather", [b, rows], [n["b_onnx"]], axis=0),
        op("Add", [n["b_onnx"], const("forget_bias", forget)], [n["b_fb"]]),
        op("Concat", [n["b_fb"], const("Rb", rb)], [n["b_flat"]], axis=0),
        op("Unsqueeze", [n["b_flat"], axis0], [n["B"]]),
        op("Unsqueeze", [h0, axis0], [n["h0"]]),
        op("Unsqueeze", [c0, axis0], [n["c0"]]),
        op("LSTM", [x, n["W"], n["R"], n["B"], "", n["h0"], n["c0"]], [n["Y"], n["Y_h"], n["Y_c"]], hidden_size=hidden),
        op("Squeeze", [n["Y"], axis1], [y]),
        op("Squeeze", [n["Y_h"], axis0], [h_n]),
        op("Squeeze", [n["Y_c"], axis0], [c_n]),
    ]


# Trainer LSTM ops: (first output kept for training only, what to export instead, converter).
_LSTM_OPS = {
    "LSTMBlockCell": (2, "h (output 0) or c (output 1)", _lstm_block_cell),
    "LSTMBlockFused": (3, "y (output 0), h_n (output 1) or c_n (output 2)", _lstm_block_fused),
}


def _contiguous(data) -> np.ndarray:
    # Not np.ascontiguousarray: it turns a 0-d array into a 1-d one.
    data = np.asarray(data)
    return data if data.flags.c_contiguous else data.copy(order="C")


def _value(name: str, t) -> ir.Value:
    dtype = None if t.dtype is None else dtypes.from_numpy(t.dtype)
    shape = None if t.shape is None else tuple(-1 if d is None else int(d) for d in t.shape)
    return ir.Value(name, dtype, shape)


# -- metadata -----------------------------------------------------------------------------------
def _metadata(src: _Source, model: ir.Model, descriptions: Mapping[str, str], labels) -> dict[str, str]:
    g = model.graph

    def describe(name: str) -> str:
        v = g.values[name]
        shape = "?" if v.shape is None else "[" + ", ".join("?" if d < 0 else str(d) for d in v.shape) + "]"
        text = f"{dtypes.NAMES.get(v.dtype or 0, '?')} {shape}"
        return f"{text}: {descriptions[name]}" if name in descriptions else text

    meta = {
        "producer": PRODUCER,
        "source": src.origin,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "inputs": json.dumps({n: describe(n) for n in g.inputs}),
        "outputs": json.dumps({n: describe(n) for n in g.outputs}),
        "frozen_ops": str(len(g.nodes)),
    }
    if src.step is not None:
        meta["training_step"] = str(src.step)
    if labels is not None:
        meta["labels"] = "\n".join(str(x) for x in labels)
    return meta


# -- the trainer's side of the parity check ------------------------------------------------------
def _trainer_outputs(src: _Source, feeds: dict, fetches: dict) -> dict[str, np.ndarray]:
    """Run the trainer in inference mode: dropout masks fed as ones, training batch norm fed as the
    moving-statistics normalization of its inputs (one extra run per batch norm, in graph order)."""
    feeds = dict(feeds)
    needed = _upstream(fetches.values(), set(feeds))
    for node in src.graph.nodes:
        if node.domain != TRAINER_DOMAIN or node not in needed:
            continue
        if node.op_type == "DropoutMask":
            x = src.session.run(node.inputs[0], feeds)
            feeds[node.outputs[0]] = np.ones_like(x)
        elif node.op_type == "BatchNormTraining":
            x, gamma, beta = src.session.run(list(node.inputs[:3]), feeds)
            scope = node.name.rsplit("/", 1)[0] + "/" if "/" in node.name else ""
            mean, var = src.values[scope + "moving_mean"], src.values[scope + "moving_variance"]
            shape = (1, -1) + (1,) * (x.ndim - 2)
            eps = x.dtype.type(node.attrs["epsilon"])
            y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * gamma.reshape(shape) + beta.reshape(shape)
            feeds[node.outputs[0]] = y.astype(x.dtype)
    names = list(fetches)
    values = src.session.run([fetches[n] for n in names], feeds)
    return dict(zip(names, values))


def _upstream(tensors, fed: set) -> set:
    """Nodes the tensors read through data edges, not looking past fed tensors."""
    nodes: set = set()
    stack = list(tensors)
    while stack:
        t = stack.pop()
        if t in fed or t.node in nodes:
            continue
        nodes.add(t.node)
        stack.extend(i for i in t.node.inputs if i is not None)
    return nodes
