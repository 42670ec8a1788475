"""``tf.io``: the TF 1.15 I/O namespace, as far as flowstack has it (TFRecord files, gfile, queues)."""

from __future__ import annotations

from trainer import gfile
from trainer.array_ops import decode_raw
from trainer.data.tfrecord import TFRecordCompressionType, TFRecordOptions, TFRecordWriter, tf_record_iterator
from trainer.graph_def import write_graph
from trainer.image_codec_ops import (decode_and_crop_jpeg, decode_bmp, decode_gif, decode_image, decode_jpeg,
                                     decode_png, encode_jpeg, encode_png, extract_jpeg_shape, is_jpeg)
from trainer.input_producers import match_filenames_once
from trainer.io_ops import decode_csv, matching_files, read_file, write_file
from trainer.parsing import FixedLenFeature, FixedLenSequenceFeature, VarLenFeature, parse_example, parse_single_example
from trainer.queues import PaddingFIFOQueue, PriorityQueue, QueueBase, RandomShuffleQueue
from trainer.sequence_parsing import parse_sequence_example, parse_single_sequence_example
from trainer.sparse_serialization import deserialize_many_sparse, serialize_many_sparse, serialize_sparse
from trainer.string_ops import decode_base64, decode_compressed, encode_base64, parse_tensor, serialize_tensor

__all__ = [
    "FixedLenFeature", "FixedLenSequenceFeature", "PaddingFIFOQueue", "PriorityQueue", "QueueBase",
    "RandomShuffleQueue", "TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter", "VarLenFeature",
    "decode_and_crop_jpeg", "decode_base64", "decode_bmp", "decode_compressed", "decode_csv", "decode_gif",
    "decode_image", "decode_jpeg", "decode_png", "decode_raw", "deserialize_many_sparse", "encode_base64",
    "encode_jpeg", "encode_png", "extract_jpeg_shape", "gfile", "is_jpeg", "match_filenames_once", "matching_files",
    "parse_example", "parse_sequence_example", "parse_single_example", "parse_single_sequence_example",
    "parse_tensor", "read_file", "serialize_many_sparse", "serialize_sparse", "serialize_tensor",
    "tf_record_iterator", "write_file", "write_graph",
]


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.io", name, globals())
