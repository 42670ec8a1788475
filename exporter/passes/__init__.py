"""Graph optimization passes (each ``IR -> IR`` in its own module) and the pass manager that runs them.

A pass is a function ``pass(model) -> (new_model, changes)``: it never edits its argument, and
``changes`` counts what it rewrote (0 = nothing to do). ``optimize`` runs the passes in order,
round after round, until a whole round changes nothing::

    optimized, report = optimize(model)
    print(report)          # per pass: what changed; op counts before and after
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from exporter import ir
from exporter.passes.attention_grouped_kv import hand_attention_grouped_kv
from exporter.passes.constant_folding import fold_constants
from exporter.passes.cse import eliminate_common_subexpressions
from exporter.passes.channels_last import to_channels_last
from exporter.passes.dead_code import eliminate_dead_code
from exporter.passes.fold_batch_norm import fold_batch_norm
from exporter.passes.fold_pad import fold_pads
from exporter.passes.fold_shape_arithmetic import fold_shape_arithmetic
from exporter.passes.fuse_activation import fuse_activations
from exporter.passes.fuse_max_pool import fuse_max_pools
from exporter.passes.fuse_pointwise import fuse_pointwise
from exporter.passes.fuse_pointwise_strided import fuse_pointwise_strided
from exporter.passes.fuse_squeeze_excite import fuse_squeeze_excite
from exporter.passes.gemm_layout import transpose_gemm_weights
from exporter.passes.graph_edit import op_counts
from exporter.passes.identity import remove_identities
from exporter.passes.matmul_add_to_gemm import matmul_add_to_gemm
from exporter.passes.merge_matmuls import merge_sibling_matmuls
from exporter.passes.pointwise_to_matmul import pointwise_to_matmul
from exporter.passes.recognize_attention import recognize_attention
from exporter.passes.recognize_gelu import recognize_gelu
from exporter.passes.recognize_layer_norm import recognize_layer_norms
from exporter.passes.recognize_rms_norm import recognize_rms_norms
from exporter.passes.recognize_rotary import recognize_rotary_embeddings
from exporter.passes.recognize_swish import recognize_swish
from exporter.passes.refine_shapes import refine_shapes
from exporter.passes.transpose_cancel import cancel_transposes

Pass = Callable[[ir.Model], "tuple[ir.Model, int]"]

# Order matters within a round: cleanups first (zero Pads into their Convs once constant folding
# has made the pads constants, then the shapes onnx's inference lost behind such computed values,
# then the shape arithmetic around reshapes those shapes make constant), then the recognisers of
# what exporters write op by op (GELU, attention and then its grouped keys and values, swish,
# layer norm, RMS norm after it, rotary embeddings, MatMul + bias as Gemm; each then sees every
# constant once and no Identity in its chains), so BatchNormalization meets its Conv directly,
# activation fusion after BatchNormalization has been folded out from between them (and after
# Gemm weights take the layout the runtime multiplies fastest), sibling MatMuls merged after
# BatchNormalization has been folded into their bias Adds, and the channels-last rewrite
# last, on the fused convolutions; max pools, then 1x1 convolutions, join the planar convolutions
# the rewrite leaves (a 1x1 convolution after a stride-1 convolution, then one before a strided
# depthwise convolution), and squeeze-excite gates into the 1x1 convolutions that read them
# (planar or channels-last, so after the rewrite), and last the remaining channels-last 1x1
# convolutions as products with row-major weights.
DEFAULT_PASSES: tuple[tuple[str, Pass], ...] = (
    ("remove_identities", remove_identities),
    ("fold_constants", fold_constants),
    ("eliminate_dead_code", eliminate_dead_code),
    ("eliminate_common_subexpressions", eliminate_common_subexpressions),
    ("cancel_transposes", cancel_transposes),
    ("fold_pads", fold_pads),
    ("refine_shapes", refine_shapes),
    ("fold_shape_arithmetic", fold_shape_arithmetic),
    ("recognize_gelu", recognize_gelu),
    ("recognize_attention", recognize_attention),
    ("hand_attention_grouped_kv", hand_attention_grouped_kv),
    ("recognize_swish", recognize_swish),
    ("recognize_layer_norms", recognize_layer_norms),
    ("recognize_rms_norms", recognize_rms_norms),
    ("recognize_rotary_embeddings", recognize_rotary_embeddings),
    ("matmul_add_to_gemm", matmul_add_to_gemm),
    ("fold_batch_norm", fold_batch_norm),
    ("transpose_gemm_weights", transpose_gemm_weights),
    ("merge_sibling_matmuls", merge_sibling_matmuls),
    ("fuse_activations", fuse_activations),
    ("to_channels_last", to_channels_last),
    ("fuse_max_pools", fuse_max_pools),
    ("fuse_pointwise", fuse_pointwise),
    ("fuse_pointwise_strided", fuse_pointwise_strided),
    ("fuse_squeeze_excite", fuse_squeeze_excite),
    ("pointwise_to_matmul", pointwise_to_matmul),
)

MAX_ROUNDS = 20


@dataclass
class PassReport:
    """What ``optimize`` did: changes per pass (summed over rounds) and op counts before/after."""

    rounds: int = 0
    changes: dict[str, int] = field(default_factory=dict)
    ops_before: Counter = field(default_factory=Counter)
    ops_after: Counter = field(default_factory=Counter)

    @property
    def nodes_before(self) -> int:
        return sum(self.ops_before.values())

    @property
    def nodes_after(self) -> int:
        return sum(self.ops_after.values())

    def __str__(self) -> str:
        lines = [f"optimized in {self.rounds} round(s): {self.nodes_before} -> {self.nodes_after} ops"]
        for name, count in self.changes.items():
            lines.append(f"  {name}: {count} change(s)")
        for op_type in sorted(set(self.ops_before) | set(self.ops_after)):
            before, after = self.ops_before[op_type], self.ops_after[op_type]
            if before != after:
                lines.append(f"  {op_type}: {before} -> {after}")
        return "\n".join(lines)


def optimize(
    model: ir.Model,
    verbose: bool = False,
    passes: Sequence[tuple[str, Pass]] = DEFAULT_PASSES,
    max_rounds: int = MAX_ROUNDS,
) -> tuple[ir.Model, PassReport]:
    """Run ``passes`` to a fixed point; returns the optimized model (the input is left as it was) and a report.

    With ``verbose``, prints each pass that changed something, round by round.
    """
    report = PassReport(changes={name: 0 for name, _ in passes}, ops_before=op_counts(model.graph))
    for round_index in range(1, max_rounds + 1):
        report.rounds = round_index
        changed = 0
        for name, run in passes:
            model, count = run(model)
            report.changes[name] += count
            changed += count
            if verbose and count:
                print(f"round {round_index}: {name}: {count} change(s)")
        if not changed:
            break
    report.ops_after = op_counts(model.graph)
    if verbose:
        print(report)
    return model, report


__all__ = [
    "DEFAULT_PASSES",
    "PassReport",
    "cancel_transposes",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_batch_norm",
    "fold_constants",
    "fold_pads",
    "fold_shape_arithmetic",
    "fuse_activations",
    "fuse_max_pools",
    "fuse_pointwise",
    "fuse_pointwise_strided",
    "fuse_squeeze_excite",
    "hand_attention_grouped_kv",
    "matmul_add_to_gemm",
    "merge_sibling_matmuls",
    "optimize",
    "pointwise_to_matmul",
    "recognize_attention",
    "recognize_gelu",
    "recognize_layer_norms",
    "recognize_rms_norms",
    "recognize_rotary_embeddings",
    "recognize_swish",
    "refine_shapes",
    "remove_identities",
    "to_channels_last",
    "transpose_gemm_weights",
]
