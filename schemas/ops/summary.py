"""Summary ops (domain ``flowstack``): values to serialized TensorBoard ``Summary`` protos."""

from __future__ import annotations

import numpy as np

from schemas.registry import REQUIRED, Attr, TensorType, op

D = "flowstack"
_OBJECT = np.dtype(object)

op("ScalarSummary", domain=D, inputs=["value"], outputs=["summary"], attrs={"tag": Attr("string", REQUIRED)})(
    lambda ctx: [TensorType(_OBJECT, ())])
op("HistogramSummary", domain=D, inputs=["values"], outputs=["summary"],
   attrs={"tag": Attr("string", REQUIRED)})(lambda ctx: [TensorType(_OBJECT, ())])
op("MergeSummary", domain=D, inputs=["inputs+"], outputs=["summary"])(lambda ctx: [TensorType(_OBJECT, ())])
op("ImageSummary", domain=D, inputs=["tensor"], outputs=["summary"],
   attrs={"tag": Attr("string", REQUIRED), "max_images": Attr("int", 3)},
   doc="Up to max_images of a [batch, height, width, 1|3|4] batch as PNGs (floats in [0, 1] scale by 255, "
       "others are min-max normalized).")(lambda ctx: [TensorType(_OBJECT, ())])
op("AudioSummary", domain=D, inputs=["tensor", "sample_rate"], outputs=["summary"],
   attrs={"tag": Attr("string", REQUIRED), "max_outputs": Attr("int", 3)},
   doc="Up to max_outputs clips of a [batch, frames(, channels)] batch in [-1, 1] as 16-bit WAV.")(
    lambda ctx: [TensorType(_OBJECT, ())])
op("TextSummary", domain=D, inputs=["tensor"], outputs=["summary"], attrs={"tag": Attr("string", REQUIRED)},
   doc="A string tensor for TensorBoard's text plugin.")(lambda ctx: [TensorType(_OBJECT, ())])
