"""Parity check: does the exported model compute what the reference computes, on the edge runtime?

Both models are serialized to .flow and run by the edge runtime on the same inputs (given, or
generated from the reference's signature). When an output is over tolerance, both are run again
with every intermediate tensor they share by name exposed, and the first of those (in the
candidate's execution order) that diverges is named in the ``ParityError``: the passes keep
names of the values they preserve, so that is where the rewrite that broke the model sits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import numpy as np

import edge_runtime
from exporter import flow_writer, ir
from exporter.example_samples import example_record_samples
from exporter.passes.graph_edit import copy_model
from schemas import dtypes

# float32 rounding accumulates with depth: MobileNetV2 with its batch norms folded differs from the
# unfolded graph by up to 3.3e-5 of its logits' scale (ResNet-18 by 9e-7), where a rewrite that
# breaks a model is off by orders of magnitude more. The ONNX backend tests allow 1e-3.
DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-6
# A declared input shape is what the file claims, not a size anyone checked: a generated sample
# larger than this would allocate gigabytes on the strength of one dim in the model's header.
MAX_GENERATED_SAMPLE_BYTES = 256 << 20


def _ones(rank: int, axis: int) -> int:
    return 1


def _nchw_spatial(rank: int, axis: int) -> int:
    return 32 if rank == 4 and axis in (2, 3) else 1


def _nhwc_spatial(rank: int, axis: int) -> int:
    return 32 if rank == 4 and axis in (1, 2) else 1


def _empty_cache(rank: int, axis: int) -> int:
    return 0 if rank == 4 and axis == 2 else 1


# How a generated sample fills a dynamic dimension (given the input's rank and the axis), tried in
# order until the reference runs on it: 1 is cheapest, but a conv net with dynamic H and W needs
# room for its kernels and strides, and 32 is enough for the usual few downsamplings. A causal LM's
# generation step takes a KV cache (batch, heads, past, head size) beside an attention mask over
# past and new tokens, which 1 everywhere makes 1 long where the model needs 2: an empty cache fits.
DYNAMIC_DIM_FILLS: tuple[Callable[[int, int], int], ...] = (_ones, _nchw_spatial, _nhwc_spatial, _empty_cache)


class ParityError(RuntimeError):
    """The candidate model cannot run, or computes something else than the reference, over tolerance."""

    def __init__(self, message: str, report: "ParityReport | None" = None):
        super().__init__(message)
        self.report = report


@dataclass
class TensorDiff:
    name: str
    max_abs: float
    max_rel: float
    within: bool


@dataclass
class ParityReport:
    """Per output, the worst absolute and relative difference over all samples."""

    samples: int = 0
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    outputs: dict[str, TensorDiff] = field(default_factory=dict)
    first_divergence: str | None = None  # name of the first shared tensor over tolerance

    @property
    def ok(self) -> bool:
        return all(d.within for d in self.outputs.values())

    def record(self, diff: TensorDiff) -> None:
        """Fold one sample's comparison of an output into that output's worst case so far."""
        old = self.outputs.get(diff.name)
        if old is not None:
            diff = TensorDiff(diff.name, max(diff.max_abs, old.max_abs), max(diff.max_rel, old.max_rel), diff.within and old.within)
        self.outputs[diff.name] = diff

    def __str__(self) -> str:
        lines = [f"parity on {self.samples} sample(s) (rtol={self.rtol:g}, atol={self.atol:g}): {'ok' if self.ok else 'FAILED'}"]
        for d in self.outputs.values():
            lines.append(f"  {d.name}: max abs diff {d.max_abs:.3g}, max rel diff {d.max_rel:.3g}{'' if d.within else '  <- over tolerance'}")
        if self.first_divergence:
            lines.append(f"  first diverging tensor: {self.first_divergence}")
        return "\n".join(lines)


def check_parity(
    reference: ir.Model,
    candidate: ir.Model,
    samples: Mapping[str, np.ndarray] | Iterable[Mapping[str, np.ndarray]] | None = None,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    seed: int = 0,
) -> ParityReport:
    """Run both models on the edge runtime and compare outputs; raise ``ParityError`` over tolerance.

    ``samples`` is one feed dict (public input name -> array), several, or None to generate one
    from the reference's signature (random normal floats, small non-negative integers, dynamic
    dimensions set to 1, or to 32 for the spatial dims of a 4-D input when the reference fails on
    1; a failure on a generated sample says so, with its shapes). Returns the report when every
    output is within ``|candidate - reference| <= atol + rtol * max(|reference|, rms(reference))``, the RMS taken
    over the output tensor (so an element that cancels to near zero is judged at its tensor's scale).
    """
    ref_runtime = _load(reference, "reference")
    cand_runtime = _load(candidate, "candidate")
    if samples is not None:
        feeds_list = _sample_list(samples)
        return _check_samples(reference, candidate, ref_runtime, cand_runtime, feeds_list, rtol, atol)
    feeds = _generate_runnable(ref_runtime, seed)
    try:
        return _check_samples(reference, candidate, ref_runtime, cand_runtime, [feeds], rtol, atol)
    except ParityError as exc:
        raise ParityError(f"{exc}\n{_describe_generated(feeds)}", exc.report) from exc


def _check_samples(reference: ir.Model, candidate: ir.Model, ref_runtime: edge_runtime.Model,
                   cand_runtime: edge_runtime.Model, feeds_list: list[Mapping[str, np.ndarray]],
                   rtol: float, atol: float) -> ParityReport:
    report = ParityReport(samples=len(feeds_list), rtol=rtol, atol=atol)
    for feeds in feeds_list:
        expected = _run(ref_runtime, feeds, "reference")
        actual = _run(cand_runtime, feeds, "candidate")
        missing = sorted(set(expected) - set(actual))
        if missing:
            raise ParityError(f"candidate model lacks output(s) {missing}; it has {sorted(actual)}", report)
        for name, want in expected.items():
            report.record(compare_tensors(name, want, actual[name], rtol, atol))
        if not report.ok:
            report.first_divergence = _first_divergence(reference, candidate, feeds, rtol, atol)
            bad = next(d for d in report.outputs.values() if not d.within)
            raise ParityError(
                f"candidate diverges from reference: first diverging tensor {report.first_divergence or bad.name!r}; "
                f"output {bad.name!r} max abs diff {bad.max_abs:.3g}, max rel diff {bad.max_rel:.3g} "
                f"(rtol={rtol:g}, atol={atol:g})\n{report}",
                report,
            )
    return report


def _describe_generated(feeds: Mapping[str, np.ndarray]) -> str:
    shapes = ", ".join(f"{name}: {a.dtype}{list(a.shape)}" for name, a in feeds.items())
    example = next(iter(feeds), "input")
    return (f"the sample was generated from the model's signature ({shapes}); if those shapes or values do not "
            f"suit the model, pass a real one: --sample {example}=file.npy (samples={{...}} from Python)")


def sample_inputs(model: ir.Model, seed: int = 0) -> dict[str, np.ndarray]:
    """One feed dict for ``model``'s public inputs, generated from their declared dtypes and shapes
    (serialized Examples for a string input that ParseExample reads: exporter/example_samples.py)."""
    return _generate(_load(model, "model"), seed, given=example_record_samples(model, seed))


def _load(model: ir.Model, role: str) -> edge_runtime.Model:
    try:
        return edge_runtime.load(flow_writer.to_bytes(model))
    except Exception as exc:
        raise ParityError(f"{role} model does not load on the edge runtime: {type(exc).__name__}: {exc}") from exc


def _run(runtime: edge_runtime.Model, feeds: Mapping[str, np.ndarray], role: str) -> dict[str, np.ndarray]:
    try:
        return runtime.run(feeds)
    except Exception as exc:
        raise ParityError(f"{role} model fails on the edge runtime: {type(exc).__name__}: {exc}") from exc


def _sample_list(samples) -> list[Mapping[str, np.ndarray]]:
    if isinstance(samples, Mapping):
        return [samples]
    samples = list(samples)
    if not samples:
        raise ValueError("samples is empty: give at least one feed dict, or None to generate one")
    return samples


def _generate_runnable(runtime: edge_runtime.Model, seed: int) -> dict[str, np.ndarray]:
    """The first sample generated over ``DYNAMIC_DIM_FILLS`` that ``runtime`` runs on, else the
    first of all (so the check reports its failure). A later fill whose sample would exceed
    ``MAX_GENERATED_SAMPLE_BYTES`` is skipped; only the first raises for it."""
    first = _generate(runtime, seed, DYNAMIC_DIM_FILLS[0])
    tried = [_shapes(first)]
    if _runs(runtime, first):
        return first
    for fill in DYNAMIC_DIM_FILLS[1:]:
        try:
            feeds = _generate(runtime, seed, fill)
        except ValueError:
            continue
        if _shapes(feeds) not in tried and _runs(runtime, feeds):
            return feeds
        tried.append(_shapes(feeds))
    return first


def _shapes(feeds: Mapping[str, np.ndarray]) -> list[tuple[int, ...]]:
    return [a.shape for a in feeds.values()]


def _runs(runtime: edge_runtime.Model, feeds: Mapping[str, np.ndarray]) -> bool:
    try:
        runtime.run(feeds)
    except Exception:  # noqa: BLE001 (whatever the failure, the next fill may suit the model)
        return False
    return True


def _generate(runtime: edge_runtime.Model, seed: int, fill: Callable[[int, int], int] = _ones,
              given: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in runtime.inputs:
        if given and spec.name in given:
            feeds[spec.name] = given[spec.name]
            continue
        rank = len(spec.shape)
        shape = tuple(fill(rank, axis) if d < 0 else d for axis, d in enumerate(spec.shape))
        size = math.prod(shape) * spec.dtype.itemsize
        if size > MAX_GENERATED_SAMPLE_BYTES:
            raise ValueError(
                f"input {spec.name!r} is declared with shape {list(spec.shape)}: a generated sample would take "
                f"{size:,} bytes (more than {MAX_GENERATED_SAMPLE_BYTES:,}); pass samples={{...}} (--sample)"
            )
        if dtypes.is_extended(spec.dtype):  # ml_dtypes' bfloat16, float8, int4...: drawn in float32, then cast
            wide = rng.integers(0, 4, shape) if spec.dtype.name.startswith(("int", "uint")) else rng.standard_normal(shape)
            feeds[spec.name] = wide.astype(np.float32).astype(spec.dtype)
        elif spec.dtype.kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
        elif spec.dtype.kind in "iu":
            feeds[spec.name] = rng.integers(0, 4, shape).astype(spec.dtype)
        elif spec.dtype.kind == "b":
            feeds[spec.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            raise ValueError(
                f"cannot generate a sample for input {spec.name!r} of dtype {spec.dtype}; pass samples={{...}}"
            )
    return feeds


def compare_tensors(name: str, want, got, rtol: float, atol: float) -> TensorDiff:
    """How far ``got`` is from the reference ``want`` (tensor ``name``); ParityError if shape or dtype differ."""
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape or want.dtype != got.dtype:
        raise ParityError(
            f"tensor {name!r}: reference has shape {list(want.shape)} dtype {want.dtype}, "
            f"candidate shape {list(got.shape)} dtype {got.dtype}"
        )
    if want.dtype.kind not in "fciub":
        same = bool(np.array_equal(want, got))
        return TensorDiff(name, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same)
    if want.size == 0:
        return TensorDiff(name, 0.0, 0.0, True)
    w, g = want.astype(np.float64), got.astype(np.float64)
    nan_mismatch = np.isnan(w) != np.isnan(g)
    both = ~(np.isnan(w) | np.isnan(g))
    with np.errstate(invalid="ignore"):  # inf - inf where both are the same infinity, zeroed below
        err = np.where(both, np.abs(w - g), 0.0)
    err = np.where(np.isinf(w) & (w == g), 0.0, err)
    # Relative to the larger of the element and the tensor's RMS: rounding in a sum (a conv, a
    # matmul, a folded batch norm) scales with the terms summed, not with the result, so an
    # element that cancels to near zero carries the error of its neighbours' magnitude.
    finite = w[np.isfinite(w)]
    scale = float(np.sqrt(np.mean(np.square(finite)))) if finite.size else 0.0
    # fmax: a NaN the reference and the candidate share is judged at the tensor's scale, not as NaN
    denominator = np.fmax(np.fmax(np.abs(w), scale), np.finfo(np.float64).tiny)
    rel = err / denominator
    within = bool(np.all(err <= atol + rtol * denominator) and not nan_mismatch.any())
    return TensorDiff(name, float(np.nan_to_num(err.max(), nan=np.inf)), float(np.nan_to_num(rel.max(), nan=np.inf)), within)


def _first_divergence(reference: ir.Model, candidate: ir.Model, feeds, rtol: float, atol: float) -> str | None:
    """The first tensor of the candidate's main graph, in execution order, that the reference also
    computes and that differs over tolerance."""
    ref_made = {o for n in reference.graph.nodes for o in n.outputs if o}
    shared = [o for n in candidate.graph.nodes for o in n.outputs if o and o in ref_made]
    if not shared:
        return None
    try:
        expected = _run(_load(_exposing(reference, shared), "reference"), feeds, "reference")
        actual = _run(_load(_exposing(candidate, shared), "candidate"), feeds, "candidate")
    except ParityError:
        return None
    for name in shared:
        if name in expected and name in actual:
            try:
                if not compare_tensors(name, expected[name], actual[name], rtol, atol).within:
                    return name
            except ParityError:
                return name
    return None


def _exposing(model: ir.Model, names: list[str]) -> ir.Model:
    exposed = copy_model(model)
    graph = exposed.graph
    graph.outputs = list(dict.fromkeys(graph.outputs + names))
    for sig in exposed.signatures.values():
        sig.outputs.update({n: n for n in names if n not in sig.outputs})
    return exposed
