"""``tf.contrib.predictor``: call an exported model like a function, ``predictor({"x": batch})``.

``from_saved_model`` takes a SavedModel folder (``tf.saved_model.simple_save`` or
``SavedModelBuilder``: the signature's graph runs in a session of its own) or an Estimator export
(``Estimator.export_saved_model`` writes ``model.flow``: the edge runtime runs it, as serving
does). ``from_estimator`` exports the estimator's newest checkpoint first. Either way the
predictor maps input keys to arrays and gives back a dict of output keys to arrays, as TensorFlow
1.x's does.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Mapping

import numpy as np

from trainer.saved_model.signature_constants import DEFAULT_SERVING_SIGNATURE_DEF_KEY
from trainer.saved_model.tag_constants import SERVING

__all__ = ["Predictor", "from_estimator", "from_saved_model"]

FLOW_FILE = "model.flow"  # what Estimator.export_saved_model writes in each version folder


class Predictor:
    """``predictor(input_dict) -> output_dict``. ``feed_tensors`` and ``fetch_tensors`` map the keys
    to the graph's tensors (or, for an exported .flow, to the model's input and output specs)."""

    feed_tensors: dict
    fetch_tensors: dict

    def __init__(self, run: Callable[[dict], dict], feed_tensors: dict, fetch_tensors: dict, close=None):
        self._run, self._close = run, close
        self.feed_tensors, self.fetch_tensors = feed_tensors, fetch_tensors

    def __call__(self, input_dict: Mapping[str, Any]) -> dict[str, np.ndarray]:
        unknown = sorted(set(input_dict) - set(self.feed_tensors))
        missing = sorted(set(self.feed_tensors) - set(input_dict))
        if unknown or missing:
            raise ValueError(f"predictor: the inputs are {sorted(self.feed_tensors)}; got unknown {unknown}, "
                             f"missing {missing}")
        return self._run(dict(input_dict))

    def close(self) -> None:
        if self._close is not None:
            self._close()
            self._close = None


def _signature(signatures: Mapping[str, Any], key: str | None, where: str):
    if key is None:
        key = DEFAULT_SERVING_SIGNATURE_DEF_KEY if DEFAULT_SERVING_SIGNATURE_DEF_KEY in signatures or \
            len(signatures) != 1 else next(iter(signatures))
    if key not in signatures:
        raise ValueError(f"predictor: {where} has no signature {key!r}; it has {sorted(signatures)}")
    return signatures[key]


def _selected(names: Mapping[str, Any], wanted, what: str) -> dict:
    if wanted is None:
        return dict(names)
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        raise ValueError(f"predictor: {what} {unknown} are not in the signature's {sorted(names)}")
    return {k: names[k] for k in wanted}


def _from_session(export_dir: str, signature_def_key, signature_def, input_names, output_names, tags, graph, config):
    from trainer.graph import Graph
    from trainer.saved_model.loader import load
    from trainer.session import Session

    graph = graph if graph is not None else Graph()
    sess = Session(graph=graph, config=config)
    loaded = load(sess, tags or [SERVING], export_dir)
    signature = signature_def or _signature(loaded.signature_def, signature_def_key, export_dir)
    feeds = _selected({k: graph.get_tensor_by_name(v.name) for k, v in signature.inputs.items()}, input_names,
                      "input_names")
    fetches = _selected({k: graph.get_tensor_by_name(v.name) for k, v in signature.outputs.items()}, output_names,
                        "output_names")

    def run(inputs: dict) -> dict:
        return sess.run(fetches, {feeds[k]: v for k, v in inputs.items()})

    predictor = Predictor(run, feeds, fetches, sess.close)
    predictor.session, predictor.graph = sess, graph
    return predictor


def _from_flow(path: str, signature_def_key, input_names, output_names):
    from edge_runtime.model import load

    with open(path, "rb") as f:
        model = load(f.read())
    signature = model.signature(signature_def_key)  # serving_default, else the file's first, when None
    feeds = _selected({spec.name: spec for spec in signature.inputs}, input_names, "input_names")
    fetches = _selected({spec.name: spec for spec in signature.outputs}, output_names, "output_names")

    def run(inputs: dict) -> dict:
        results = model.run(inputs, list(fetches), signature=signature.key)
        return {k: np.asarray(results[k]) for k in fetches}

    return Predictor(run, feeds, fetches)


def from_saved_model(export_dir, signature_def_key: str | None = None, signature_def=None, input_names=None,
                     output_names=None, tags=None, graph=None, config=None) -> Predictor:
    """A predictor over ``export_dir``'s signature (``serving_default``, or its only one)."""
    export_dir = os.fsdecode(export_dir)
    flow = os.path.join(export_dir, FLOW_FILE)
    if os.path.isfile(flow):
        if signature_def is not None:
            raise ValueError("predictor: signature_def= applies to SavedModel folders; an Estimator export "
                             f"({flow}) has its signatures in the model")
        return _from_flow(flow, signature_def_key, input_names, output_names)
    return _from_session(export_dir, signature_def_key, signature_def, input_names, output_names, tags, graph,
                         config)


def from_estimator(estimator, serving_input_receiver_fn, output_key=None, graph=None, config=None) -> Predictor:
    """A predictor over ``estimator``'s newest checkpoint, fed as ``serving_input_receiver_fn`` says."""
    with tempfile.TemporaryDirectory(prefix="predictor-") as base:
        export_dir = estimator.export_saved_model(base, serving_input_receiver_fn)
        return from_saved_model(export_dir, signature_def_key=output_key, graph=graph, config=config)
