"""``tf.python_io``: TFRecord files (trainer/data/tfrecord.py) written and read outside a graph."""

from __future__ import annotations

from trainer.data.tfrecord import TFRecordCompressionType, TFRecordOptions, TFRecordWriter, tf_record_iterator

__all__ = ["TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter", "tf_record_iterator"]


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.python_io", name, globals())
