"""Input-pipeline ops (domain ``flowstack``), with TensorFlow 1.x's names.

A dataset is a pipeline description kept outside the graph (trainer/data); the graph holds only
iterators over it: a handle op creates the iterator as session state, ``MakeIterator`` (re)starts
it over a dataset whose captured tensors are its inputs, and ``IteratorGetNext`` takes the next
element, flattened to its components. Kernels live in trainer/data/iterator.py.
"""

from __future__ import annotations

import json

import numpy as np

from schemas.registry import REQUIRED, Attr, TensorType, op

D = "flowstack"
_OBJECT = np.dtype(object)

_HANDLE_ATTRS = {"shared_name": Attr("string", ""), "dataset": Attr("string", "")}


def _component_types(ctx) -> list[TensorType]:
    dtypes = ctx.attrs["output_types"]
    shapes = ctx.attrs["output_shapes"] or [""] * len(dtypes)
    return [TensorType(np.dtype(d), None if not s else tuple(None if n < 0 else n for n in json.loads(s)))
            for d, s in zip(dtypes, shapes)]


op("Iterator", domain=D, inputs=[], outputs=["handle"], stateful=True, attrs=_HANDLE_ATTRS,
   doc="An initializable iterator: session state that MakeIterator starts over a dataset.")(
    lambda ctx: [TensorType(_OBJECT, ())])
op("OneShotIterator", domain=D, inputs=["captured*"], outputs=["handle"], stateful=True, attrs=_HANDLE_ATTRS,
   doc="An iterator started over ``dataset`` the first time a session runs it (captured: its tensors).")(
    lambda ctx: [TensorType(_OBJECT, ())])
op("MakeIterator", domain=D, inputs=["handle", "captured*"], outputs=["done*"], stateful=True,
   attrs={"dataset": Attr("string", REQUIRED)},
   doc="(Re)start the iterator over ``dataset``, whose captured tensors are the inputs after the handle.")(
    lambda ctx: [])
op("IteratorGetNext", domain=D, inputs=["handle"], outputs=["components+"], stateful=True,
   attrs={"output_types": Attr("strings", REQUIRED), "output_shapes": Attr("strings", ())},
   doc="The iterator's next element (OutOfRangeError at the end); shapes as JSON, -1 unknown.")(
    _component_types)


# ParseExample's feature kinds: a dense tensor of a fixed shape, a padded sequence of them, or a
# sparse tensor (three outputs: indices, values, dense_shape).
FIXED, SEQUENCE, SPARSE = 0, 1, 2


def _parsed_types(ctx) -> list[TensorType]:
    """The outputs of each feature in turn: its dtype; a dense one's shape after the serialized input's
    (batch) shape, a sequence feature's with a dimension of unknown length first."""
    batch = ctx.input(0).shape
    int64 = np.dtype(np.int64)
    types = []
    for dtype, shape, kind in zip(ctx.attrs["dtypes"], json.loads(ctx.attrs["shapes"]), ctx.attrs["kinds"]):
        if kind == SPARSE:
            rank = None if batch is None else len(batch) + 1
            types += [TensorType(int64, (None, rank)), TensorType(np.dtype(dtype), (None,)), TensorType(int64, (rank,))]
            continue
        inner = ((None,) if kind == SEQUENCE else ()) + tuple(shape)
        types.append(TensorType(np.dtype(dtype), None if batch is None else tuple(batch) + inner))
    return types


op("ParseExample", domain=D, inputs=["serialized", "defaults*"], outputs=["values*"],
   attrs={"keys": Attr("strings", REQUIRED), "dtypes": Attr("strings", REQUIRED), "shapes": Attr("string", REQUIRED),
          "kinds": Attr("ints", REQUIRED), "num_outputs": Attr("int", REQUIRED)},
   output_count_attr="num_outputs",
   doc="Serialized tf.train.Example records (a scalar or any batch shape) to tensors per feature (keys, dtypes, "
       "shapes: a JSON list of shapes, kinds: FIXED, SEQUENCE or SPARSE, the last giving indices, values and "
       "dense_shape). defaults: one per feature, an empty array where there is none.")(_parsed_types)


@op("DecodeCSV", domain=D, inputs=["records", "record_defaults+"], outputs=["output+"],
   attrs={"field_delim": Attr("string", ","), "use_quote_delim": Attr("int", 1), "na_value": Attr("string", ""),
          "select_cols": Attr("ints", ())},
   doc="TensorFlow's DecodeCSV: each record (a string, any shape) split into one field per record_default; "
       "output i has record_defaults[i]'s dtype and the records' shape. A default is one value, or none where "
       "the field is required; an empty field or one equal to na_value takes the default.")
def _decode_csv(ctx):
    for i in range(1, ctx.num_inputs):
        shape = ctx.input(i).shape
        if shape is not None and (len(shape) > 1 or (shape and shape[0] not in (0, 1, None))):
            raise ctx.fail(f"record_defaults[{i - 1}] must hold at most one value, got shape {shape}")
    return [TensorType(ctx.input(i).dtype, ctx.input(0).shape) for i in range(1, ctx.num_inputs)]


# -- TensorFlow 1.x's readers: session state reading the files a queue of filenames hands out ------
# A reader op creates its ReaderState (trainer/reader_state.py) under ``shared_name``; ReaderRead
# takes the next record, dequeuing the next file name (the "work") when the current one is done.
_READER_ATTRS = {"shared_name": Attr("string", "")}


def _reader_handle(ctx):
    return [TensorType(_OBJECT, ())]


op("TextLineReader", domain=D, inputs=[], outputs=["reader_handle"], stateful=True,
   attrs={**_READER_ATTRS, "skip_header_lines": Attr("int", 0)},
   doc="Records are a file's lines (without line endings), after skip_header_lines; keys 'file:line'.")(
    _reader_handle)
op("TFRecordReader", domain=D, inputs=[], outputs=["reader_handle"], stateful=True,
   attrs={**_READER_ATTRS, "compression_type": Attr("string", "")},
   doc="Records are a TFRecord file's records (checksums checked); keys 'file:offset'.")(_reader_handle)
op("FixedLengthRecordReader", domain=D, inputs=[], outputs=["reader_handle"], stateful=True,
   attrs={**_READER_ATTRS, "record_bytes": Attr("int", REQUIRED), "header_bytes": Attr("int", 0),
          "footer_bytes": Attr("int", 0), "hop_bytes": Attr("int", 0), "encoding": Attr("string", "")},
   doc="Records are record_bytes long, hop_bytes apart (0: record_bytes), between a header and a footer; "
       "keys 'file:index'.")(_reader_handle)
op("WholeFileReader", domain=D, inputs=[], outputs=["reader_handle"], stateful=True, attrs=_READER_ATTRS,
   doc="One record per file: its whole contents, keyed by the file name.")(_reader_handle)
op("IdentityReader", domain=D, inputs=[], outputs=["reader_handle"], stateful=True, attrs=_READER_ATTRS,
   doc="One record per work item: the item itself as both key and value.")(_reader_handle)

op("ReaderRead", domain=D, inputs=["reader_handle", "queue_handle"], outputs=["key", "value"], stateful=True,
   doc="The reader's next (key, value); OutOfRangeError once the queue is closed and drained.")(
    lambda ctx: [TensorType(_OBJECT, ()), TensorType(_OBJECT, ())])
op("ReaderReadUpTo", domain=D, inputs=["reader_handle", "queue_handle", "num_records"], outputs=["keys", "values"],
   stateful=True, doc="Up to num_records records, across files; fewer only when the queue runs out.")(
    lambda ctx: [TensorType(_OBJECT, (None,)), TensorType(_OBJECT, (None,))])
op("ReaderNumRecordsProduced", domain=D, inputs=["reader_handle"], outputs=["records_produced"], stateful=True)(
    lambda ctx: [TensorType(np.dtype(np.int64), ())])
op("ReaderNumWorkUnitsCompleted", domain=D, inputs=["reader_handle"], outputs=["units_completed"],
   stateful=True)(lambda ctx: [TensorType(np.dtype(np.int64), ())])
op("ReaderReset", domain=D, inputs=["reader_handle"], outputs=["done*"], stateful=True,
   doc="Forget the current file and the counts.")(lambda ctx: [])

# -- files: read, written and listed at run time (stateful: the file system is state) --------------
op("ReadFile", domain=D, inputs=["filename"], outputs=["contents"], stateful=True,
   doc="A file's whole contents as a scalar byte string.")(lambda ctx: [TensorType(_OBJECT, ())])
op("WriteFile", domain=D, inputs=["filename", "contents"], outputs=["done*"], stateful=True,
   doc="Write a scalar (byte) string as a file's whole contents, creating its folder.")(lambda ctx: [])
op("MatchingFiles", domain=D, inputs=["pattern"], outputs=["filenames"], stateful=True,
   doc="The sorted file names matching a glob pattern (or each of a 1-D list of them).")(
    lambda ctx: [TensorType(_OBJECT, (None,))])
