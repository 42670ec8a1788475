"""``tf.saved_model.builder.SavedModelBuilder``: a trained graph's meta graphs, variables and
signatures in one folder (``layout.py``), its serving signature frozen to ``model.flow``.

The serving signature (``serving_default``, or the only signature) of the first meta graph tagged
``serve`` is frozen by the exporter as ``flowstack export`` does, checked against the session. A
graph the exporter cannot freeze still saves (``loader.load`` reads it back, as TensorFlow would),
with a warning and the reason in the description, so ``flowstack serve`` is not left guessing.
"""

from __future__ import annotations

import importlib
import os

from trainer import tf_logging
from trainer.graph import Graph, get_default_graph
from trainer.meta_graph import export_meta_graph
from trainer.saved_model import signature_constants as sc
from trainer.saved_model import tag_constants
from trainer.saved_model.layout import SERVED_MODEL_FILE, meta_graph_file, variables_prefix, write_description
from trainer.saved_model.signature_def_utils import SignatureDef
from trainer.saver import Saver
from trainer.variables import global_variables

__all__ = ["SavedModelBuilder", "serving_signature", "tag_list"]

# The exporter's freeze-check-optimize-write entry point, looked up when a model is frozen (the
# trainer package does not import the exporter).
_EXPORTER = ("exporter.freeze", "export_trained")


def tag_list(tags) -> list[str]:
    tags = [tags] if isinstance(tags, str) else list(tags or [])
    if not tags or not all(isinstance(t, str) and t for t in tags):
        raise ValueError(f"tags must be a non-empty list of strings, got {tags!r}")
    return sorted(set(tags))


def serving_signature(signatures: dict[str, SignatureDef]) -> str | None:
    """The key of the signature a server answers by default: ``serving_default``, or the only one."""
    if sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY in signatures:
        return sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY
    return next(iter(signatures)) if len(signatures) == 1 else None


def _signatures(signature_def_map, graph: Graph) -> dict[str, SignatureDef]:
    signatures = dict(signature_def_map or {})
    for key, sig in signatures.items():
        if not isinstance(sig, SignatureDef):
            raise TypeError(f"signature {key!r}: expected a SignatureDef (signature_def_utils.predict_signature_def "
                            f"& co.), got {type(sig).__name__}")
        for alias, info in {**sig.inputs, **sig.outputs}.items():
            try:
                graph.get_tensor_by_name(info.name)
            except (KeyError, ValueError) as e:
                raise ValueError(f"signature {key!r}, alias {alias!r}: tensor {info.name!r} is not in the graph "
                                 f"being saved ({e})") from None
    return signatures


class SavedModelBuilder:
    """Build a SavedModel in ``export_dir``: ``add_meta_graph_and_variables`` once, then
    ``add_meta_graph`` for more tag sets, then ``save``."""

    def __init__(self, export_dir):
        self._export_dir = os.fsdecode(export_dir)
        if os.path.exists(self._export_dir):
            if not os.path.isdir(self._export_dir) or os.listdir(self._export_dir):
                raise AssertionError(f"Export directory already exists, and isn't empty. Please choose a different "
                                     f"export directory, or delete all the contents of the specified directory: "
                                     f"{self._export_dir}")
        else:
            os.makedirs(self._export_dir)
        self._meta_graphs: list[dict] = []
        self._saver: Saver | None = None
        self._variables_saved = False
        self._served: dict | None = None

    def add_meta_graph_and_variables(self, sess, tags, signature_def_map=None, assets_collection=None,
                                     legacy_init_op=None, clear_devices: bool = False, main_op=None,
                                     strip_default_attrs: bool = False, saver=None, train_op=None) -> None:
        """Save ``sess``'s variables and the meta graph of its graph under ``tags``."""
        if self._variables_saved:
            raise AssertionError("Graph state including variables and assets has already been saved. Please invoke "
                                 "`add_meta_graph()` instead.")
        graph = sess.graph
        if global_variables(graph):
            with graph.as_default():
                self._saver = saver or Saver(graph=graph)
            self._saver.save(sess, variables_prefix(self._export_dir), write_meta_graph=False, write_state=False,
                             write_graph=False)
        self._variables_saved = True
        self._add(graph, tags, signature_def_map, main_op or legacy_init_op, clear_devices, sess)

    def add_meta_graph(self, tags, signature_def_map=None, assets_collection=None, legacy_init_op=None,
                       clear_devices: bool = False, main_op=None, strip_default_attrs: bool = False,
                       saver=None) -> None:
        """The default graph's meta graph under ``tags``, sharing the variables already saved."""
        if not self._variables_saved:
            raise AssertionError("Graph state including variables and assets has not been saved yet. Please invoke "
                                 "`add_meta_graph_and_variables()` first.")
        self._add(get_default_graph(), tags, signature_def_map, main_op or legacy_init_op, clear_devices, None)

    def save(self, as_text: bool = False) -> bytes:
        """Write the description that makes the folder a SavedModel (last, atomically); returns the
        folder's path. ``as_text`` changes nothing: the description is always JSON text."""
        write_description(self._export_dir, self._meta_graphs, self._served)
        return self._export_dir.encode()

    # -- plumbing -----------------------------------------------------------------------------------
    def _add(self, graph: Graph, tags, signature_def_map, init_op, clear_devices: bool, sess) -> None:
        tags = tag_list(tags)
        if any(set(m["tags"]) == set(tags) for m in self._meta_graphs):
            raise ValueError(f"a meta graph with tags {tags} is already in this SavedModel")
        signatures = _signatures(signature_def_map, graph)
        name = meta_graph_file(len(self._meta_graphs))
        saver = self._saver if self._saver is not None and self._saver.graph is graph else None
        export_meta_graph(os.path.join(self._export_dir, name), graph=graph, saver=saver, clear_devices=clear_devices)
        self._meta_graphs.append({"tags": tags, "meta_graph": name, "init_op": getattr(init_op, "name", None),
                                  "signature_def": {k: s.to_dict() for k, s in signatures.items()}})
        if self._served is None and tag_constants.SERVING in tags and signatures:
            self._served = self._freeze(graph, tags, signatures, sess)

    def _freeze(self, graph: Graph, tags: list[str], signatures: dict[str, SignatureDef], sess) -> dict:
        key = serving_signature(signatures)
        if key is None:
            reason = f"no {sc.DEFAULT_SERVING_SIGNATURE_DEF_KEY!r} signature among {sorted(signatures)}"
            tf_logging.warning("SavedModel %s: %s, so no %s is written for serving", self._export_dir, reason,
                               SERVED_MODEL_FILE)
            return {"tags": tags, "signature": None, "error": reason}
        sig = signatures[key]
        own_session = sess is None
        if own_session:
            from trainer.session import Session

            sess = Session(graph)
        try:
            if own_session and global_variables(graph):
                with graph.as_default():
                    restorer = self._saver if self._saver is not None and self._saver.graph is graph else Saver(graph=graph)
                restorer.restore(sess, variables_prefix(self._export_dir))
            module, name = _EXPORTER
            export_trained = getattr(importlib.import_module(module), name)
            export_trained(sess, os.path.join(self._export_dir, SERVED_MODEL_FILE),
                           {alias: info.name for alias, info in sig.inputs.items()},
                           {alias: info.name for alias, info in sig.outputs.items()})
        except Exception as e:  # noqa: BLE001 - the SavedModel stays loadable; serving is told why not
            reason = f"{type(e).__name__}: {e}"
            tf_logging.warning("SavedModel %s: signature %r could not be frozen for serving (%s)", self._export_dir,
                               key, reason)
            return {"tags": tags, "signature": key, "error": reason}
        finally:
            if own_session:
                sess.close()
        return {"tags": tags, "signature": key, "file": SERVED_MODEL_FILE}


Builder = SavedModelBuilder
