"""Forward kernels for the edge runtime, one module per op family."""

from edge_runtime.kernels.registry import (get_kernel, has_kernel, host_inputs, kernel, registered_kernels,
                                           wants_output_count)

__all__ = ["get_kernel", "has_kernel", "host_inputs", "kernel", "registered_kernels", "wants_output_count"]
