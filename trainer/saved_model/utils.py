"""``tf.saved_model.utils``: tensor records for signatures."""

from trainer.saved_model.signature_def_utils import build_tensor_info, get_tensor_from_tensor_info

__all__ = ["build_tensor_info", "get_tensor_from_tensor_info"]
