"""Freeze: a trained graph plus chosen inputs and outputs becomes a self-contained inference model.

    model = freeze(sess, inputs={"image": x}, outputs={"probs": probs})        # a live session
    model = freeze("/tmp/digits", inputs={"image": "images:0"}, outputs={"probs": "probabilities:0"})

Only what the outputs need is kept (optimizers, savers, queues, summaries and gradient ops fall
away with everything else the outputs do not read); variables become constants holding their
current values (from the session, or the newest checkpoint of a directory, whose graph.npz
supplies the graph); training-mode ops become inference-mode ones: ``x * DropoutMask(x)`` is
``x``, ``BatchNormTraining`` is ``BatchNormalization`` over its scope's ``moving_mean`` and
``moving_variance``, ``LSTMBlockCell`` is spelled in ONNX ops. What cannot be frozen is refused
with a ``FreezeError`` naming the tensor, file or op and what to do about it.

``check_trainer_parity`` runs the trainer itself (in inference mode) and the frozen or optimized
model on the edge runtime over the same inputs, so an export is checked against the trainer's
own outputs, not against another rewrite of them.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from exporter import flow_writer, ir
from exporter.verify import DEFAULT_ATOL, DEFAULT_RTOL, ParityError, ParityReport, TensorDiff
from schemas import dtypes

TRAINER_DOMAIN = "flowstack"
PRODUCER = "flowstack trainer"

# Ops the control-flow lowering would need; loops and conds are not frozen yet (see _refuse_control_flow).
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
            diff = _compare(name, want, actual[name], rtol, atol)
            old = report.outputs.get(name)
            if old is not None:
                diff = TensorDiff(name, max(diff.max_abs, old.max_abs), max(diff.max_rel, old.max_rel), diff.within and old.within)
            report.outputs[name] = diff
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
    report = export(frozen, destination, optimize_graph=optimize_graph, verify=verify, samples=samples, verbose=verbose)
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
        _, values = load_checkpoint(path)
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
class _Freezer:
    def __init__(self, src: _Source, inputs: dict, outputs: dict):
        self.src = src
        self.inputs = inputs
        self.outputs = outputs
        self.graph = ir.Graph(name="main")
        self.names: dict = {}  # trainer Tensor -> IR value name

    def model(self) -> ir.Model:
        for public, t in self.inputs.items():
            self.names[t] = public
            self.graph.inputs.append(public)
            self.graph.values[public] = _value(public, t)
        needed = self._needed()
        for node in self.src.graph.nodes:
            if node in needed:
                self._convert(node)
        for public, t in self.outputs.items():
            name = self.names[t]
            if name in self.graph.outputs or name in self.graph.inputs or name in self.graph.constants():
                self.graph.nodes.append(ir.Node("Identity", [name], [public], name=public))
            else:
                self._rename(name, public)
            self.graph.values[public] = _value(public, t)
            self.graph.outputs.append(public)
        signature = ir.Signature({p: p for p in self.inputs}, {p: p for p in self.outputs})
        return ir.Model(self.graph, opset_imports={"": 21}, producer=PRODUCER,
                        signatures={"serving_default": signature})

    def _needed(self) -> set:
        """Nodes the outputs read, data edges only, stopping at the inputs; refuses unfed placeholders."""
        fed = set(self.inputs.values())
        needed: set = set()
        for public, out in self.outputs.items():
            stack = [out]
            seen: set = set()
            while stack:
                t = stack.pop()
                if t in fed or t.node in seen:
                    continue
                node = t.node
                seen.add(node)
                if node.op_type == "Placeholder":
                    raise FreezeError(
                        f"output {public!r} ({out.name}) depends on placeholder {node.name!r}, which is not among the "
                        f"inputs; add it to the inputs (e.g. --inputs {node.name}) or export an output that does not need it")
                if node.op_type in _CONTROL_FLOW and node.domain == TRAINER_DOMAIN:
                    raise FreezeError(
                        f"output {public!r} depends on {node.op_type} node {node.name!r} of a while_loop or cond; "
                        "freezing control flow into Loop/If subgraphs is not supported yet: export an output "
                        "outside the loop, or build the model with static unrolling")
                if node.op_type == "BatchNormTraining" and t.index > 0:
                    raise FreezeError(f"output {public!r} reads the batch statistics {t.name} of BatchNormTraining node "
                                      f"{node.name!r}, which inference does not compute; export its normalized output")
                if _is_dropout(node):
                    stack.append(_dropped_operand(node))
                    continue
                stack.extend(i for i in node.inputs if i is not None)
            needed |= seen
        return needed

    def _convert(self, node) -> None:
        g = self.graph
        if _is_dropout(node):
            self.names[node.outputs[0]] = self.names[_dropped_operand(node)]
            return
        outs = [t.name for t in node.outputs]
        for t in node.outputs:
            self.names[t] = t.name
            g.values[t.name] = _value(t.name, t)
        ins = [self.names[t] if t is not None else "" for t in node.inputs]
        if node.op_type == "Variable" and node.domain == TRAINER_DOMAIN:
            g.values[outs[0]] = ir.Value(outs[0], data=np.ascontiguousarray(self._variable(node.name)))
        elif node.op_type == "Constant" and node.domain == "":
            g.values[outs[0]] = ir.Value(outs[0], data=np.ascontiguousarray(node.attrs["value"]))
        elif node.op_type == "BatchNormTraining" and node.domain == TRAINER_DOMAIN:
            g.nodes.append(self._batch_norm(node, ins, outs))
        elif node.op_type == "StackPush" and node.domain == TRAINER_DOMAIN:
            g.nodes.append(ir.Node("Identity", ins, outs, name=node.name))
        elif node.op_type == "LSTMBlockCell" and node.domain == TRAINER_DOMAIN:
            g.nodes.extend(_lstm_block_cell(g, node, ins, outs))
        else:
            _check_edge_kernel(node)
            attrs = {k: v for k, v in node.attrs.items() if v is not None}
            g.nodes.append(ir.Node(node.op_type, ins, outs, attrs, name=node.name, domain=node.domain))

    def _variable(self, name: str) -> np.ndarray:
        if name not in self.src.values:
            raise FreezeError(f"variable {name!r} has no value: run its initializer (or restore a checkpoint) before freezing")
        return self.src.values[name]

    def _batch_norm(self, node, ins, outs) -> ir.Node:
        scope = node.name.rsplit("/", 1)[0] if "/" in node.name else ""
        stats = []
        for stat in ("moving_mean", "moving_variance"):
            var = f"{scope}/{stat}" if scope else stat
            if var not in self.src.values:
                raise FreezeError(f"node {node.name!r} (BatchNormTraining): no variable {var!r} with its moving "
                                  "statistics; build batch norm with trainer.layers.batch_normalization")
            const = f"{var}:0"
            self.graph.values[const] = ir.Value(const, data=np.ascontiguousarray(self.src.values[var]))
            stats.append(const)
        return ir.Node("BatchNormalization", ins[:3] + stats, outs[:1], {"epsilon": float(node.attrs["epsilon"])},
                       name=node.name)

    def _rename(self, old: str, new: str) -> None:
        from exporter.passes.graph_edit import rename_value

        rename_value(self.graph, old, new)
        for t, name in self.names.items():
            if name == old:
                self.names[t] = new


def _is_dropout(node) -> bool:
    return node.op_type == "Mul" and node.domain == "" and any(
        t is not None and t.node.op_type == "DropoutMask" and t.node.domain == TRAINER_DOMAIN for t in node.inputs)


def _dropped_operand(node):
    return next(t for t in node.inputs if t.node.op_type != "DropoutMask")


def _check_edge_kernel(node) -> None:
    from edge_runtime.kernels import get_kernel, has_kernel

    # The registry is shared with the trainer's kernels; only those edge_runtime defines ship to devices.
    if not has_kernel(node.op_type, node.domain) or not get_kernel(node.op_type, node.domain).__module__.startswith("edge_runtime."):
        qual = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
        hint = ("it is a training-only op; export an output that does not depend on it"
                if node.domain == TRAINER_DOMAIN else "add an edge kernel for it in edge_runtime/kernels/")
        raise FreezeError(f"op {qual} (node {node.name!r}) has no edge runtime kernel, so the frozen model "
                          f"could not run on the edge: {hint}")


def _lstm_block_cell(g: ir.Graph, node, ins, outs) -> list[ir.Node]:
    """LSTMBlockCell in ONNX ops: z = [x, h] @ W + b; i, f, g, o = split(z); c' = s(f)c + s(i)tanh(g); h' = s(o)tanh(c')."""
    x, h, c, w, b = ins
    p = node.name + "/"
    used = [o for o in outs[:2]]

    def n(op, inputs, outputs, **attrs):
        return ir.Node(op, inputs, outputs, attrs, name=p + outputs[0].rsplit("/", 1)[-1])

    nodes = [
        n("Concat", [x, h], [p + "xh"], axis=1),
        n("Gemm", [p + "xh", w, b], [p + "z"]),
        n("Split", [p + "z"], [p + "zi", p + "zf", p + "zg", p + "zo"], axis=1, num_outputs=4),
        n("Sigmoid", [p + "zi"], [p + "i"]),
        n("Sigmoid", [p + "zf"], [p + "f"]),
        n("Tanh", [p + "zg"], [p + "g"]),
        n("Sigmoid", [p + "zo"], [p + "o"]),
        n("Mul", [p + "f", c], [p + "fc"]),
        n("Mul", [p + "i", p + "g"], [p + "ig"]),
        n("Add", [p + "fc", p + "ig"], [used[1]]),
        n("Tanh", [used[1]], [p + "tc"]),
        n("Mul", [p + "o", p + "tc"], [used[0]]),
    ]
    for extra in outs[2:]:
        g.values.pop(extra, None)
    return nodes


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
