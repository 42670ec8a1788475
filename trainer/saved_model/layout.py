"""The files of a flowstack SavedModel folder, and its description file.

    <export_dir>/saved_model.json       tags, signatures and meta graph file of each meta graph (written last)
    <export_dir>/meta_graph_<i>.meta    each meta graph (the .meta format of trainer/meta_graph.py)
    <export_dir>/variables/variables.*  the variables' checkpoint (trainer/saver.py)
    <export_dir>/model.flow             the serving signature frozen for the edge runtime and ``flowstack serve``

A folder ``models/<name>/<version>/`` written by ``simple_save`` is therefore a version of a model
repository as ``flowstack serve`` reads it, as TensorFlow Serving reads a SavedModel there.
"""

from __future__ import annotations

import json
import os

from trainer.checkpoint_format import atomic_write

__all__ = ["DESCRIPTION_FILE", "SERVED_MODEL_FILE", "SavedModelError", "VARIABLES_DIRECTORY", "VARIABLES_FILENAME",
           "meta_graph_file", "read_description", "variables_prefix", "write_description"]

DESCRIPTION_FILE = "saved_model.json"
SERVED_MODEL_FILE = "model.flow"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
FORMAT = "flowstack-saved-model"
FORMAT_VERSION = 1
_MAX_DESCRIPTION_BYTES = 16 << 20


class SavedModelError(ValueError):
    """A SavedModel folder that is missing, damaged, or does not hold what was asked of it."""


def variables_prefix(export_dir: str) -> str:
    return os.path.join(export_dir, VARIABLES_DIRECTORY, VARIABLES_FILENAME)


def meta_graph_file(index: int) -> str:
    return f"meta_graph_{index}.meta"


def write_description(export_dir: str, meta_graphs: list[dict], served: dict | None) -> None:
    desc = {"format": FORMAT, "version": FORMAT_VERSION, "meta_graphs": meta_graphs, "served": served}
    data = json.dumps(desc, indent=1).encode("utf-8")
    atomic_write(os.path.join(export_dir, DESCRIPTION_FILE), lambda f: f.write(data))


def read_description(export_dir: str) -> dict:
    """The folder's description, checked enough that a reader can index it."""
    path = os.path.join(os.fsdecode(export_dir), DESCRIPTION_FILE)
    if not os.path.isfile(path):
        folder = os.fsdecode(export_dir)
        if os.path.isfile(os.path.join(folder, "model.flow")):
            raise SavedModelError(f"{folder} is an Estimator export (model.flow), not a SavedModel of graphs: "
                                  "call it with tf.contrib.predictor.from_saved_model, serve it, or load it with "
                                  "edge_runtime.load")
        raise SavedModelError(f"SavedModel file does not exist at: {folder} (no {DESCRIPTION_FILE}; "
                              f"tf.saved_model.simple_save or SavedModelBuilder.save writes it)")
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_DESCRIPTION_BYTES + 1)
        if len(data) > _MAX_DESCRIPTION_BYTES:
            raise ValueError(f"larger than {_MAX_DESCRIPTION_BYTES} bytes")
        desc = json.loads(data.decode("utf-8"))
        if not isinstance(desc, dict) or desc.get("format") != FORMAT:
            raise ValueError("not a flowstack SavedModel description")
        if desc.get("version") != FORMAT_VERSION:
            raise ValueError(f"format version {desc.get('version')!r}, this reader knows {FORMAT_VERSION}")
        for record in desc["meta_graphs"]:
            if not (isinstance(record["tags"], list) and isinstance(record["meta_graph"], str)
                    and isinstance(record["signature_def"], dict)):
                raise ValueError("a meta graph record lacks tags, meta_graph or signature_def")
            if os.path.basename(record["meta_graph"]) != record["meta_graph"]:
                raise ValueError(f"meta graph file {record['meta_graph']!r} is not a file of the folder")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise SavedModelError(f"{path} is damaged or not a flowstack SavedModel: {type(e).__name__}: {e}") from None
    return desc
