"""``tf.train.Example`` and its parts, wire-compatible with TensorFlow's example.proto and
feature.proto: records written here are read by TensorFlow and the other way round.

The message classes are made by protobuf's own runtime from a descriptor written here (in a
private pool, so a TensorFlow installed beside flowstack never clashes); protobuf comes with the
``train`` extra (tensorboard needs it).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["BytesList", "Example", "Feature", "FeatureList", "FeatureLists", "Features", "FloatList", "Int64List",
           "SequenceExample"]

_F = descriptor_pb2.FieldDescriptorProto


def _field(message, name: str, number: int, kind: int, label: int = _F.LABEL_OPTIONAL, type_name: str = "",
           packed: bool = False, oneof: int | None = None) -> None:
    f = message.field.add(name=name, number=number, type=kind, label=label)
    if type_name:
        f.type_name = type_name
    if packed:
        f.options.packed = True
    if oneof is not None:
        f.oneof_index = oneof


def _map(message, name: str, value_type: str) -> None:
    """A ``map<string, value_type> name = 1`` field: a repeated nested entry message, as protoc writes it."""
    entry = message.nested_type.add(name=name.title().replace("_", "") + "Entry")
    entry.options.map_entry = True
    _field(entry, "key", 1, _F.TYPE_STRING)
    _field(entry, "value", 2, _F.TYPE_MESSAGE, type_name=value_type)
    _field(message, name, 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, f".tensorflow.{message.name}.{entry.name}")


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="flowstack/example.proto", package="tensorflow", syntax="proto3")
    for name, kind, packed in (("BytesList", _F.TYPE_BYTES, False), ("FloatList", _F.TYPE_FLOAT, True),
                               ("Int64List", _F.TYPE_INT64, True)):
        _field(fd.message_type.add(name=name), "value", 1, kind, _F.LABEL_REPEATED, packed=packed)
    feature = fd.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (name, type_name) in enumerate((("bytes_list", "BytesList"), ("float_list", "FloatList"),
                                                ("int64_list", "Int64List")), start=1):
        _field(feature, name, number, _F.TYPE_MESSAGE, type_name=f".tensorflow.{type_name}", oneof=0)
    _map(fd.message_type.add(name="Features"), "feature", ".tensorflow.Feature")
    _field(fd.message_type.add(name="FeatureList"), "feature", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
           ".tensorflow.Feature")
    _map(fd.message_type.add(name="FeatureLists"), "feature_list", ".tensorflow.FeatureList")
    _field(fd.message_type.add(name="Example"), "features", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    sequence = fd.message_type.add(name="SequenceExample")
    _field(sequence, "context", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    _field(sequence, "feature_lists", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.FeatureLists")
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _message(name: str):
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"tensorflow.{name}"))


BytesList = _message("BytesList")
FloatList = _message("FloatList")
Int64List = _message("Int64List")
Feature = _message("Feature")
Features = _message("Features")
FeatureList = _message("FeatureList")
FeatureLists = _message("FeatureLists")
Example = _message("Example")
SequenceExample = _message("SequenceExample")
