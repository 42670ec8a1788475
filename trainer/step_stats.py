"""What a traced ``Session.run`` records: TF1's ``RunMetadata.step_stats`` and its Chrome trace.

A TF1 script asks for a trace with ``options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)``
and ``run_metadata=tf.RunMetadata()``; after the run ``run_metadata.step_stats`` holds one
``DeviceStepStats`` per device with a ``NodeExecStats`` per kernel run (start and duration in
microseconds), and ``Timeline(run_metadata.step_stats).generate_chrome_trace_format()`` writes
the JSON that chrome://tracing and Perfetto open, as ``tensorflow.python.client.timeline`` does.

>>> import numpy as np, trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     y = tf.matmul(tf.constant(np.ones((4, 4), np.float32)), tf.constant(np.ones((4, 4), np.float32)), name="product")
>>> meta = tf.RunMetadata()
>>> _ = tf.Session(g).run(y, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=meta)
>>> [n.node_name for d in meta.step_stats.dev_stats for n in d.node_stats]
['product']
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = ["DeviceStepStats", "NodeExecStats", "StepStats", "Timeline", "run_metadata_bytes", "step_stats_of"]


@dataclass
class NodeExecStats:
    node_name: str
    timeline_label: str  # "name = OpType(inputs)", as TensorFlow labels a node
    all_start_micros: int
    op_start_rel_micros: int
    op_end_rel_micros: int
    all_end_rel_micros: int


@dataclass
class DeviceStepStats:
    device: str
    node_stats: list[NodeExecStats] = field(default_factory=list)


@dataclass
class StepStats:
    dev_stats: list[DeviceStepStats] = field(default_factory=list)


def step_stats_of(device: str, timings: list[tuple[object, float, float]]) -> StepStats:
    """StepStats of one device from ``(node, start, end)`` wall-clock seconds, in run order."""
    stats = DeviceStepStats(device)
    for node, start, end in timings:
        inputs = ", ".join(t.name for t in getattr(node, "inputs", ()) if t is not None)
        duration = max(0, round((end - start) * 1e6))
        stats.node_stats.append(NodeExecStats(node.name, f"{node.name} = {node.op_type}({inputs})",
                                              round(start * 1e6), 0, duration, duration))
    return StepStats([stats])


class Timeline:
    """``Timeline(step_stats).generate_chrome_trace_format()``: the Chrome trace-event JSON of a
    traced run, one process per device and one complete event per kernel."""

    def __init__(self, step_stats: StepStats | None, graph=None):
        if step_stats is None:
            raise ValueError("Timeline: step_stats is None; run with options=RunOptions(trace_level=FULL_TRACE) "
                             "and run_metadata=RunMetadata()")
        self.step_stats = step_stats
        self.graph = graph

    def generate_chrome_trace_format(self, show_dataflow: bool = True, show_memory: bool = False) -> str:
        events = []
        starts = [n.all_start_micros for d in self.step_stats.dev_stats for n in d.node_stats]
        origin = min(starts, default=0)
        for pid, device in enumerate(self.step_stats.dev_stats):
            events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{device.device} Compute"}})
            for node in device.node_stats:
                op = node.timeline_label.split(" = ", 1)[-1].split("(", 1)[0]
                events.append({"name": op, "cat": "Op", "ph": "X", "pid": pid, "tid": 0,
                               "ts": node.all_start_micros - origin, "dur": node.all_end_rel_micros,
                               "args": {"name": node.node_name, "op": op}})
        return json.dumps({"traceEvents": events})


def run_metadata_bytes(run_metadata) -> bytes:
    """``run_metadata`` (a ``tf.RunMetadata``, or TensorFlow's proto) as a serialized RunMetadata
    proto, its step stats included, as ``FileWriter.add_run_metadata`` records it for TensorBoard."""
    if hasattr(run_metadata, "SerializeToString"):
        return run_metadata.SerializeToString()
    from trainer.kernels.summary import tensorboard_proto

    proto = tensorboard_proto("config_pb2").RunMetadata()
    for device in getattr(run_metadata.step_stats, "dev_stats", ()):
        dev = proto.step_stats.dev_stats.add(device=device.device)
        for node in device.node_stats:
            dev.node_stats.add(node_name=node.node_name, timeline_label=node.timeline_label,
                               all_start_micros=node.all_start_micros, op_start_rel_micros=node.op_start_rel_micros,
                               op_end_rel_micros=node.op_end_rel_micros, all_end_rel_micros=node.all_end_rel_micros)
    return proto.SerializeToString()
