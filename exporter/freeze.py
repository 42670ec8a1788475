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

The jobs live apart: opening the source (``freeze_source``), the graph rewrite, one rule per op
(``freeze_rewrite``), trainer ops spelled in ONNX ops (``freeze_lowering``) and the trainer's
inference-mode run (``trainer_inference``). ``check_trainer_parity`` runs the trainer itself (in
inference mode) and the frozen or optimized model on the edge runtime over the same inputs, so
an export is checked against the trainer's own outputs, not against another rewrite of them.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from edge_runtime.example_records import EXAMPLE_INPUTS_KEY
from exporter import flow_writer, ir
from exporter.example_samples import example_record_samples
from exporter.freeze_rewrite import PRODUCER, Freezer
from exporter.freeze_source import FreezeError, FreezeSource, open_source, resolve_tensors
from exporter.trainer_inference import inference_outputs
from exporter.verify import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    ParityError,
    ParityReport,
)
from schemas import dtypes

__all__ = ["FreezeError", "check_trainer_parity", "export_trained", "freeze", "trainer_outputs"]


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
    src = open_source(source)
    model = Freezer(src, resolve_tensors(src.graph, inputs, "input"), resolve_tensors(src.graph, outputs, "output")).model()
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
    from exporter.verify import compare_tensors as _compare

    src = open_source(source)
    feeds_in = resolve_tensors(src.graph, inputs, "input")
    fetches = resolve_tensors(src.graph, outputs, "output")
    runtime = edge_runtime.load(flow_writer.to_bytes(model))
    report = ParityReport(samples=0, rtol=rtol, atol=atol)
    for sample in [samples] if isinstance(samples, Mapping) else list(samples):
        report.samples += 1
        expected = inference_outputs(src, {feeds_in[k]: v for k, v in sample.items()}, fetches)
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

    src = open_source(source)
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
    src = open_source(source)
    feeds_in = resolve_tensors(src.graph, inputs, "input")
    return inference_outputs(src, {feeds_in[k]: v for k, v in feeds.items()}, resolve_tensors(src.graph, outputs, "output"))


# -- metadata -----------------------------------------------------------------------------------
def _metadata(src: FreezeSource, model: ir.Model, descriptions: Mapping[str, str], labels) -> dict[str, str]:
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
    records = example_record_samples(model)
    if records:  # inputs a server builds from TF Serving's JSON examples, and a record to warm up with
        meta[EXAMPLE_INPUTS_KEY] = json.dumps({name: base64.b64encode(r.reshape(-1)[0]).decode()
                                               for name, r in records.items()})
    if src.step is not None:
        meta["training_step"] = str(src.step)
    if labels is not None:
        meta["labels"] = "\n".join(str(x) for x in labels)
    return meta
