"""TensorArrays (domain ``flowstack``, TensorFlow's names; the Python side is trainer/tensor_array.py).

A TensorArray's elements are held as one value, its *flow*: an array whose first axis indexes the
elements, or an empty array of shape (0,) until the first write when the element shape is not
known in advance. Every op is functional (a write returns a new flow), so a TensorArray is a
``while_loop`` variable like any tensor and gradients flow through it. Reads and gathers are
``Gather`` on the flow; these are the ops that write it.
"""

from __future__ import annotations

import numpy as np

from schemas.registry import Attr, TensorType, op

D = "flowstack"
_GROWTH = {"dynamic_size": Attr("int", 0)}


def _written_flow(ctx):
    """A written flow keeps its shape when it is allocated and cannot grow."""
    flow = ctx.input(0)
    fixed = not ctx.attrs["dynamic_size"] and flow.shape is not None and flow.shape[:1] != (0,)
    return [flow if fixed else TensorType(flow.dtype, None)]


op("TensorArrayScatter", domain=D, inputs=["flow", "indices", "value", "size"], outputs=["flow_out"], attrs=_GROWTH,
   differentiable=True,
   doc="The flow with element indices set to value (one element for a scalar index, value's rows for a "
       "vector); allocates an empty flow to max(size, largest index + 1) elements of value's shape and "
       "grows a dynamic_size one. size: the declared size, -1 if none.")(_written_flow)

op("TensorArrayScatterGrad", domain=D, inputs=["grad", "flow", "indices"], outputs=["grad_flow", "grad_value"],
   doc="TensorArrayScatter's gradient: grad with the written elements zeroed and cut to the old flow's "
       "length, and the written elements' gradient.")(
    lambda ctx: [ctx.input(1), TensorType(ctx.input(0).dtype, None)])

op("TensorArraySize", domain=D, inputs=["flow", "size"], outputs=["size_out"],
   doc="The number of elements: the flow's length once written, else the declared size (0 if none).")(
    lambda ctx: [TensorType(np.dtype(np.int32), ())])

op("TensorArrayStack", domain=D, inputs=["flow"], outputs=["value"],
   attrs={"element_shape": Attr("ints", []), "element_shape_known": Attr("int", 0)}, differentiable=True,
   doc="The elements stacked: the flow itself, or (0, *element_shape) zeros for a TensorArray never written.")(
    lambda ctx: [ctx.input(0) if ctx.input(0).shape not in (None, (0,)) else TensorType(ctx.input(0).dtype, None)])
