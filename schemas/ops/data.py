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
