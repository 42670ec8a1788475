"""``tf.lite`` as TF 1.15 scripts use it to ship a trained model to a phone: ``TFLiteConverter``
writes a ``.flow`` (the edge runtime's format, in place of a ``.tflite``) and ``Interpreter`` is
the edge runtime's LiteRT-style interpreter, which runs it.

    converter = tf.lite.TFLiteConverter.from_session(sess, [x], [probs])
    converter.optimizations = [tf.lite.Optimize.DEFAULT]        # int8 weights (dynamic range)
    open("model.flow", "wb").write(converter.convert())

Post-training quantization follows the TFLite converter's switches: ``Optimize.DEFAULT`` alone
quantizes weights to int8 with float activations; with a ``representative_dataset`` activations
too (full int8, calibrated on its samples); with ``target_spec.supported_types = [tf.float16]``
weights are stored as float16. The model is frozen, optimized and checked against the session as
``flowstack export`` does (exporter.freeze.export_trained).
"""

from __future__ import annotations

import importlib
import os
import tempfile
from dataclasses import dataclass, field

import numpy as np

from edge_runtime.interpreter import Interpreter
from trainer.dtypes import float16

__all__ = ["Interpreter", "OpsSet", "Optimize", "RepresentativeDataset", "TFLiteConverter", "TargetSpec"]

_EXPORTER = ("exporter.freeze", "export_trained")  # looked up when converting: trainer does not import the exporter
_QUANTIZATION = ("exporter.quantize", "QuantizationRequest")


class Optimize:
    DEFAULT = "DEFAULT"
    OPTIMIZE_FOR_SIZE = "OPTIMIZE_FOR_SIZE"
    OPTIMIZE_FOR_LATENCY = "OPTIMIZE_FOR_LATENCY"


class OpsSet:
    """Accepted for scripts that set them; the edge runtime has one set of kernels."""

    TFLITE_BUILTINS = "TFLITE_BUILTINS"
    TFLITE_BUILTINS_INT8 = "TFLITE_BUILTINS_INT8"
    SELECT_TF_OPS = "SELECT_TF_OPS"


@dataclass
class TargetSpec:
    supported_ops: set = field(default_factory=lambda: {OpsSet.TFLITE_BUILTINS})
    supported_types: list = field(default_factory=list)


class RepresentativeDataset:
    """Calibration samples: ``input_gen()`` yields, per sample, a list of arrays in input order."""

    def __init__(self, input_gen):
        self.input_gen = input_gen


class TFLiteConverter:
    """Freeze a session's graph (or a SavedModel's serving signature) into ``.flow`` bytes."""

    def __init__(self, session, inputs: dict, outputs: dict):
        self._session, self._inputs, self._outputs = session, inputs, outputs
        self.optimizations: list = []
        self.target_spec = TargetSpec()
        self.representative_dataset = None
        self.inference_input_type = self.inference_output_type = None
        self.allow_custom_ops = False
        self.experimental_new_converter = True

    @classmethod
    def from_session(cls, sess, input_tensors, output_tensors) -> "TFLiteConverter":
        """The model from ``input_tensors`` to ``output_tensors`` of ``sess``'s graph, with the values
        its variables have now; inputs and outputs are named by their ops (``x:0`` is ``x``)."""
        return cls(sess, {t.op.name: t for t in input_tensors}, {t.op.name: t for t in output_tensors})

    @classmethod
    def from_saved_model(cls, saved_model_dir, input_arrays=None, input_shapes=None, output_arrays=None,
                         tag_set=None, signature_key=None) -> "TFLiteConverter":
        """A SavedModel's signature (``serving_default`` by default), its inputs and outputs named by
        the signature's aliases."""
        from trainer.graph import Graph
        from trainer.saved_model import loader
        from trainer.saved_model.builder import serving_signature
        from trainer.session import Session

        sess = Session(Graph())
        meta = loader.load(sess, list(tag_set or ["serve"]), saved_model_dir)
        key = signature_key or serving_signature(meta.signature_def)
        if key not in meta.signature_def:
            raise ValueError(f"SavedModel {saved_model_dir}: no signature {key!r}; it has {sorted(meta.signature_def)}")
        sig = meta.signature_def[key]
        pick = {"inputs": input_arrays, "outputs": output_arrays}
        chosen = {side: {a: sess.graph.get_tensor_by_name(info.name) for a, info in infos.items()
                         if pick[side] is None or a in pick[side]}
                  for side, infos in (("inputs", sig.inputs), ("outputs", sig.outputs))}
        return cls(sess, chosen["inputs"], chosen["outputs"])

    @classmethod
    def from_frozen_graph(cls, graph_def_file, input_arrays, output_arrays, input_shapes=None) -> "TFLiteConverter":
        """A frozen GraphDef file (``convert_variables_to_constants``, then ``write_graph`` or
        ``SerializeToString``) from the ops ``input_arrays`` to ``output_arrays``; ``input_shapes``
        (``{name: shape}``) fixes the inputs' shapes."""
        from trainer.graph import Graph
        from trainer.graph_def import GraphDef, import_graph_def
        from trainer.session import Session

        graph_def = GraphDef()
        with open(os.fspath(graph_def_file), "rb") as f:
            graph_def.ParseFromString(f.read())
        graph = Graph()
        with graph.as_default():
            import_graph_def(graph_def, name="")
        missing = [n for n in list(input_arrays) + list(output_arrays) if not graph.has_node(n)]
        if missing:
            raise ValueError(f"{graph_def_file}: no node {missing[0]!r} in the graph")
        inputs = {n: graph.tensor(f"{n}:0") for n in input_arrays}
        for n, shape in (input_shapes or {}).items():
            inputs[n].set_shape(shape)
        return cls(Session(graph), inputs, {n: graph.tensor(f"{n}:0") for n in output_arrays})

    def convert(self) -> bytes:
        """The frozen, optimized, checked (and, as asked, quantized) model's ``.flow`` bytes."""
        module, name = _EXPORTER
        export_trained = getattr(importlib.import_module(module), name)
        with tempfile.TemporaryDirectory(prefix="flowstack-lite-") as folder:
            path = os.path.join(folder, "model.flow")
            export_trained(self._session, path, self._inputs, self._outputs, quantization=self._quantization())
            with open(path, "rb") as f:
                return f.read()

    def _quantization(self):
        if not set(self.optimizations) & {Optimize.DEFAULT, Optimize.OPTIMIZE_FOR_SIZE, Optimize.OPTIMIZE_FOR_LATENCY}:
            return None
        module, name = _QUANTIZATION
        request = getattr(importlib.import_module(module), name)
        if any(t == float16 or t == np.float16 for t in self.target_spec.supported_types):
            return request("float16")
        if self.representative_dataset is None:
            return request("dynamic-int8")
        return request("int8", self._calibration())

    def _calibration(self) -> dict[str, np.ndarray]:
        gen = getattr(self.representative_dataset, "input_gen", self.representative_dataset)
        names = list(self._inputs)
        samples: dict[str, list] = {n: [] for n in names}
        for sample in gen():
            values = list(sample.values()) if isinstance(sample, dict) else list(sample)
            if len(values) != len(names):
                raise ValueError(f"representative_dataset yielded {len(values)} arrays; the model has {len(names)} "
                                 f"inputs {names}")
            for n, v in zip(names, values):
                samples[n].append(np.asarray(v))
        if not samples[names[0]]:
            raise ValueError("representative_dataset yielded no samples")
        return {n: np.concatenate([v if v.ndim else v[None] for v in vs]) for n, vs in samples.items()}


TocoConverter = TFLiteConverter  # TF 1.x's earlier name
