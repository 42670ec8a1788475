"""TensorBoard summaries: summary ops, an event-file writer, and a console progress bar.

Event files are written by TensorBoard's own ``EventFileWriter`` (records, checksums, a queue
and a flushing thread), the bar is tqdm's; both are imported when first used, so training
without them needs neither installed.
"""

from __future__ import annotations

import re
import sys
import time

import numpy as np

from trainer.graph import TRAINER_DOMAIN, GraphKeys, get_default_graph
from trainer.kernels.summary import graph_def as encode_graph_def
from trainer.kernels.summary import scalar_summary, tensorboard_proto
from trainer.ops import convert_to_tensor, make_op
from trainer.summary_proto import FileWriterCache, Summary

__all__ = ["FileWriter", "FileWriterCache", "ProgressBar", "Summary", "audio", "tensor_summary", "histogram", "image", "merge",
           "merge_all", "scalar", "text"]


_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w.]")


def _clean_tag(name: str) -> str:
    """``name`` as TensorFlow makes it a legal tag: each character other than letters, digits, ``_``,
    ``-``, ``/`` and ``.`` becomes ``_``, leading slashes go. So ``histogram(v.name, v)`` (the
    TF1 idiom) records ``"dense/kernel:0"`` as ``"dense/kernel_0"``."""
    return _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")


def _scoped_tag(name: str, family: str | None, graph) -> str:
    """A summary's tag as TensorFlow 1.x makes it: the name scope the summary opens, so the enclosing
    scopes prefix it and a repeated name in one scope becomes ``name_1`` (``family``, when given,
    goes before the name and again in front)."""
    name = _clean_tag(name)
    if family is None:
        return graph.unique_name(name)
    family = _clean_tag(family)
    return f"{family}/{graph.unique_name(f'{family}/{name}')}"


def _summary_op(op_type: str, name: str, inputs: list, attrs: dict, collections, family=None):
    graph = inputs[0].graph
    tag = _scoped_tag(name, family, graph)
    t = make_op(op_type, inputs, {"tag": tag, **attrs}, domain=TRAINER_DOMAIN,
                name="summary_" + tag.rsplit("/", 1)[-1]).outputs[0]
    return _collect(t, collections)


def scalar(name: str, tensor, collections=(GraphKeys.SUMMARIES,), family=None):
    """A summary op recording a scalar tensor under ``name`` (scoped as ``_scoped_tag`` says)."""
    return _summary_op("ScalarSummary", name, [convert_to_tensor(tensor)], {}, collections, family)


def histogram(name: str, values, collections=(GraphKeys.SUMMARIES,), family=None):
    """A summary op recording the distribution of ``values`` under ``name``."""
    return _summary_op("HistogramSummary", name, [convert_to_tensor(values)], {}, collections, family)


def tensor_summary(name: str, tensor, summary_description=None, collections=(GraphKeys.SUMMARIES,)):
    """A scalar tensor's value under ``name`` (non-scalar tensors: use histogram or text)."""
    return scalar(name, tensor, collections)


def image(name: str, tensor, max_outputs: int = 3, collections=(GraphKeys.SUMMARIES,), family=None):
    """Up to ``max_outputs`` images of a [batch, height, width, channels] tensor, under ``name/image/i``."""
    return _summary_op("ImageSummary", name, [convert_to_tensor(tensor)], {"max_images": max_outputs}, collections,
                       family)


def audio(name: str, tensor, sample_rate, max_outputs: int = 3, collections=(GraphKeys.SUMMARIES,), family=None):
    """Up to ``max_outputs`` clips of a [batch, frames(, channels)] tensor in [-1, 1], as WAV."""
    x = convert_to_tensor(tensor)
    rate = convert_to_tensor(np.asarray(sample_rate, np.float32), graph=x.graph)
    return _summary_op("AudioSummary", name, [x, rate], {"max_outputs": max_outputs}, collections, family)


def text(name: str, tensor, collections=(GraphKeys.SUMMARIES,)):
    """A string tensor for TensorBoard's Text tab."""
    value = tensor if hasattr(tensor, "graph") else np.asarray(tensor, dtype=object)
    return _summary_op("TextSummary", name, [convert_to_tensor(value)], {}, collections)


def _collect(t, collections):
    for c in collections or ():
        t.graph.add_to_collection(c, t)
    return t


def merge(summaries):
    return make_op("MergeSummary", list(summaries), domain=TRAINER_DOMAIN).outputs[0]


def merge_all(graph=None):
    """One op producing every summary in the SUMMARIES collection (None if there are none)."""
    items = (graph or get_default_graph()).get_collection(GraphKeys.SUMMARIES)
    return merge(items) if items else None


def _event(**fields):
    """A TensorBoard ``Event`` stamped now, with ``fields`` (step=, summary=, graph_def=)."""
    return tensorboard_proto("event_pb2").Event(wall_time=time.time(), **fields)


class FileWriter:
    """Appends events to ``logdir/events.out.tfevents.<time>.<host>...``, readable by TensorBoard."""

    def __init__(self, logdir: str, graph=None, max_queue: int = 10, flush_secs: float = 2.0, graph_def=None,
                 filename_suffix: str | None = None, session=None):
        tensorboard_proto("event_pb2")  # the clear ImportError first, should tensorboard be missing
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._writer = EventFileWriter(logdir, max_queue_size=max_queue, flush_secs=flush_secs,
                                       filename_suffix=filename_suffix or "")
        if graph is not None:
            self.add_graph(graph)
        self.flush()

    def add_graph(self, graph, global_step: int | None = None, graph_def=None) -> None:
        """Record ``graph`` as a GraphDef, which TensorBoard's Graphs tab draws."""
        self._writer.add_event(_event(step=global_step or 0, graph_def=encode_graph_def(graph.nodes)))

    def add_run_metadata(self, run_metadata, tag: str, global_step: int | None = None) -> None:
        """Record a traced run's ``RunMetadata`` under ``tag`` (TensorBoard's per-run compute times)."""
        from trainer.step_stats import run_metadata_bytes

        tagged = tensorboard_proto("event_pb2").TaggedRunMetadata(tag=tag, run_metadata=run_metadata_bytes(run_metadata))
        self._writer.add_event(_event(step=global_step or 0, tagged_run_metadata=tagged))

    def get_logdir(self) -> str:
        return self._writer.get_logdir()

    def add_summary(self, summary, global_step: int | None = None) -> None:
        """Record a Summary (the value of a summary op: serialized bytes; or a Summary message) at ``global_step``."""
        if isinstance(summary, np.ndarray):
            summary = summary[()]
        data = summary.SerializeToString() if hasattr(summary, "SerializeToString") else bytes(summary)
        summary_pb2 = tensorboard_proto("summary_pb2")
        self._writer.add_event(_event(step=global_step or 0, summary=summary_pb2.Summary.FromString(data)))

    def add_event(self, event) -> None:
        """Append an ``Event`` as it is (``tf.summary.Event``; its wall_time and step are the caller's)."""
        if not hasattr(event, "SerializeToString") or type(event).__name__ != "Event":
            raise TypeError(f"FileWriter.add_event: expected a tf.summary.Event, got {type(event).__name__}")
        self._writer.add_event(event)

    def add_session_log(self, session_log, global_step: int | None = None) -> None:
        """Record a ``SessionLog`` (START, STOP or CHECKPOINT, as TensorBoard reads restarts)."""
        if type(session_log).__name__ != "SessionLog":
            raise TypeError(f"FileWriter.add_session_log: expected a tf.summary.SessionLog, "
                            f"got {type(session_log).__name__}")
        self._writer.add_event(_event(step=global_step or 0, session_log=session_log))

    def add_scalar(self, tag: str, value: float, global_step: int | None = None) -> None:
        self.add_summary(scalar_summary(tag, value), global_step)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ProgressBar:
    """A one-line console progress bar (tqdm's) with steps per second and the latest metrics."""

    def __init__(self, total: int, width: int = 30, stream=None, min_interval: float = 0.1):
        from tqdm import tqdm

        self.total = total
        self._bar = tqdm(total=total, file=stream or sys.stderr, mininterval=min_interval, unit="steps",
                         bar_format="{l_bar}{bar:%d}{r_bar}" % width)

    def update(self, step: int, **metrics) -> None:
        """Move the bar to ``step`` showing ``metrics`` (name=value); it closes at ``total``."""
        self._bar.set_postfix_str(" ".join(f"{k}={v:.4g}" for k, v in metrics.items()), refresh=False)
        self._bar.update(step - self._bar.n)
        if step >= self.total:
            self._bar.close()


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol
    from trainer.summary_events import EVENT_MESSAGES, event_message

    if name in EVENT_MESSAGES:
        try:
            return event_message(name)
        except ImportError:
            pass  # no tensorboard: the symbol is unsupported here
    raise missing_symbol("tf.summary", name, globals())
