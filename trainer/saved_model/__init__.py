"""``tf.saved_model`` as TensorFlow 1.15 spells it: ``simple_save``, ``builder.SavedModelBuilder``,
``loader.load``, signatures and their constants.

A SavedModel written here is a folder of flowstack files (``layout.py``), not TensorFlow's protocol
buffers; what a TF1 script does with one works unchanged: save after training, ``loader.load`` it
in another script, or serve it, since the folder holds the serving signature frozen as
``model.flow`` (``simple_save(sess, "models/digits/1", ...)`` then ``flowstack serve --model-repository models``).
"""

from __future__ import annotations

from trainer.saved_model import builder, loader, main_op, signature_constants, signature_def_utils, tag_constants, utils
from trainer.saved_model.builder import Builder, SavedModelBuilder
from trainer.saved_model.layout import VARIABLES_DIRECTORY, VARIABLES_FILENAME, SavedModelError
from trainer.saved_model.loader import load, maybe_saved_model_directory
from trainer.saved_model.main_op import main_op_with_restore
from trainer.saved_model.signature_constants import (
    CLASSIFY_INPUTS,
    CLASSIFY_METHOD_NAME,
    CLASSIFY_OUTPUT_CLASSES,
    CLASSIFY_OUTPUT_SCORES,
    DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    PREDICT_INPUTS,
    PREDICT_METHOD_NAME,
    PREDICT_OUTPUTS,
    REGRESS_INPUTS,
    REGRESS_METHOD_NAME,
    REGRESS_OUTPUTS,
)
from trainer.saved_model.signature_def_utils import (
    build_signature_def,
    build_tensor_info,
    classification_signature_def,
    get_tensor_from_tensor_info,
    is_valid_signature,
    predict_signature_def,
    regression_signature_def,
)
from trainer.saved_model.tag_constants import GPU, SERVING, TPU, TRAINING

contains_saved_model = maybe_saved_model_directory


def simple_save(session, export_dir, inputs: dict, outputs: dict, legacy_init_op=None) -> None:
    """Save ``session``'s graph and variables to ``export_dir`` (which must not exist, or be empty)
    with one ``serving_default`` Predict signature from ``inputs`` to ``outputs`` (alias -> tensor),
    tagged ``serve``."""
    b = SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(session, tags=[SERVING], legacy_init_op=legacy_init_op, clear_devices=True,
                                   signature_def_map={DEFAULT_SERVING_SIGNATURE_DEF_KEY: predict_signature_def(inputs, outputs)})
    b.save()


__all__ = [
    "Builder", "CLASSIFY_INPUTS", "CLASSIFY_METHOD_NAME", "CLASSIFY_OUTPUT_CLASSES", "CLASSIFY_OUTPUT_SCORES",
    "DEFAULT_SERVING_SIGNATURE_DEF_KEY", "GPU", "PREDICT_INPUTS", "PREDICT_METHOD_NAME", "PREDICT_OUTPUTS",
    "REGRESS_INPUTS", "REGRESS_METHOD_NAME", "REGRESS_OUTPUTS", "SERVING", "SavedModelBuilder", "SavedModelError",
    "TPU", "TRAINING", "VARIABLES_DIRECTORY", "VARIABLES_FILENAME", "build_signature_def", "build_tensor_info",
    "builder", "classification_signature_def", "contains_saved_model", "get_tensor_from_tensor_info",
    "is_valid_signature", "load", "loader", "main_op", "main_op_with_restore", "maybe_saved_model_directory", "predict_signature_def",
    "regression_signature_def", "signature_constants", "signature_def_utils", "simple_save", "tag_constants", "utils",
]
