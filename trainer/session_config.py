"""``tf.ConfigProto`` and friends: the session options TF1 scripts build and pass to ``Session``.

Sessions accept them; of their fields only ``inter_op_parallelism_threads`` changes anything here
(the session's thread pool size); GPU memory options, placement logging and device counts describe
TensorFlow's runtime and are kept for the script's own use.
"""

from __future__ import annotations

__all__ = ["ConfigProto", "GPUOptions", "GraphOptions", "OptimizerOptions", "RunMetadata", "RunOptions"]


class _Options:
    _defaults: dict = {}

    def __init__(self, **fields):
        unknown = set(fields) - set(self._defaults)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {sorted(unknown)}; it has {sorted(self._defaults)}")
        for key, value in self._defaults.items():
            setattr(self, key, fields.get(key, value() if callable(value) else value))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self._defaults)})"


class GPUOptions(_Options):
    _defaults = {"allow_growth": False, "per_process_gpu_memory_fraction": 0.0, "visible_device_list": "",
                 "force_gpu_compatible": False}


class OptimizerOptions(_Options):
    L0, L1 = -1, 0
    ON_1, OFF = 1, 2
    _defaults = {"opt_level": 0, "do_common_subexpression_elimination": False, "do_constant_folding": False,
                 "global_jit_level": 0}


class GraphOptions(_Options):
    _defaults = {"optimizer_options": OptimizerOptions, "build_cost_model": 0, "infer_shapes": False,
                 "place_pruned_graph": False, "enable_bfloat16_sendrecv": False}


class ConfigProto(_Options):
    _defaults = {"allow_soft_placement": False, "log_device_placement": False, "device_count": dict,
                 "gpu_options": GPUOptions, "graph_options": GraphOptions, "inter_op_parallelism_threads": 0,
                 "intra_op_parallelism_threads": 0, "operation_timeout_in_ms": 0, "use_per_session_threads": False}


class RunOptions(_Options):
    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3
    _defaults = {"trace_level": 0, "timeout_in_ms": 0, "output_partition_graphs": False}


class RunMetadata(_Options):
    _defaults = {"step_stats": None, "partition_graphs": list, "cost_graph": None}
