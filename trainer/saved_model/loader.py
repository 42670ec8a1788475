"""``tf.saved_model.loader``: a SavedModel's meta graph back into a session, variables restored."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from trainer.meta_graph import import_meta_graph
from trainer.saved_model.builder import tag_list
from trainer.saved_model.layout import DESCRIPTION_FILE, read_description, variables_prefix
from trainer.saved_model.signature_def_utils import SignatureDef

__all__ = ["LoadedMetaGraph", "MetaInfoDef", "load", "maybe_saved_model_directory"]


@dataclass
class MetaInfoDef:
    tags: list[str] = field(default_factory=list)


@dataclass
class LoadedMetaGraph:
    """What ``load`` returns, as TensorFlow's MetaGraphDef is read: ``signature_def[key].inputs[alias].name``."""

    signature_def: dict[str, SignatureDef]
    meta_info_def: MetaInfoDef


def maybe_saved_model_directory(export_dir) -> bool:
    """Whether ``export_dir`` holds a SavedModel (its description file)."""
    return os.path.isfile(os.path.join(os.fsdecode(export_dir), DESCRIPTION_FILE))


def load(sess, tags, export_dir, import_scope=None, **saver_kwargs) -> LoadedMetaGraph:
    """Import the meta graph saved under exactly ``tags`` into ``sess.graph``, restore its variables
    into ``sess`` and run its init op (``main_op``/``legacy_init_op``)."""
    export_dir = os.fsdecode(export_dir)  # bytes too: export_saved_model returns the path as bytes
    desc = read_description(export_dir)
    wanted = tag_list(tags)
    record = next((m for m in desc["meta_graphs"] if sorted(m["tags"]) == wanted), None)
    if record is None:
        available = [m["tags"] for m in desc["meta_graphs"]]
        raise RuntimeError(f"MetaGraphDef associated with tags {wanted} could not be found in SavedModel "
                           f"{export_dir}; the tag-sets it has: {available}")
    graph = sess.graph
    with graph.as_default():
        saver = import_meta_graph(os.path.join(export_dir, record["meta_graph"]), import_scope=import_scope,
                                  graph=graph)
    if saver is not None:
        saver.restore(sess, variables_prefix(export_dir))
    if record.get("init_op"):
        sess.run(graph.get_operation_by_name(record["init_op"]))
    return LoadedMetaGraph({k: SignatureDef.from_dict(v) for k, v in record["signature_def"].items()},
                           MetaInfoDef(list(record["tags"])))
