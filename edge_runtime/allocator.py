"""Keep the memory that one run frees for the next run (glibc's malloc).

A model run allocates and frees the same large arrays every time (activations, im2col columns).
glibc serves a block above its mmap threshold with a fresh ``mmap`` and unmaps it on ``free``, and
gives the top of its heap back to the kernel once more than its trim threshold is free; either way
the next run touches new pages, and every 4 KiB page costs a fault. Its thresholds adapt as blocks
are freed, but not far enough for a model's working set: MobileNetV2 at 224x224 took 2,400-2,900
minor page faults a run here, and ran 1.28x faster (29.3 -> 22.9 ms, alternated runs) with the
thresholds below, for no growth in peak resident memory (60 MB either way).

TensorFlow Lite and onnxruntime reuse their own arenas; NumPy has none, so the runtime raises the
two thresholds once, when the first model is loaded on the CPU (and the trainer when a session has
a CPU device: the benchmark CNN's training step faulted in 2,500-4,000 pages and ran 96 ms, 89 ms
without the faults). Arrays above the mmap threshold's ceiling (32 MiB) are still mapped per run.

Set ``FLOWSTACK_MALLOC_TUNING=0`` to leave the allocator as it is; a process that sets glibc's own
``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` keeps its settings. Other C libraries
(bionic on Android, musl) and 32-bit processes are left alone.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

# mallopt parameter numbers, from glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the heap: glibc's largest accepted value on 64-bit (half its
# 64 MiB heap size), above any single array of the benchmark models.
MMAP_THRESHOLD_BYTES = 32 << 20
# Free memory at the top of the heap kept, not returned, up to this much.
TRIM_THRESHOLD_BYTES = 256 << 20

OPT_OUT_VARIABLE = "FLOWSTACK_MALLOC_TUNING"
_GLIBC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")

_lock = threading.Lock()
_state: str | None = None


def keep_freed_memory() -> str:
    """Raise glibc's mmap and trim thresholds once per process; returns what was done:
    ``"tuned"``, or why not (``"disabled"``, ``"user settings"``, ``"not glibc"``, ``"32-bit"``,
    ``"failed"``)."""
    global _state
    with _lock:
        if _state is None:
            _state = _tune()
        return _state


def _tune() -> str:
    if os.environ.get(OPT_OUT_VARIABLE, "1").strip().lower() in ("0", "false", "no", "off"):
        return "disabled"
    if any(name in os.environ for name in _GLIBC_VARIABLES):
        return "user settings"
    if platform.libc_ver()[0] != "glibc":
        return "not glibc"
    if ctypes.sizeof(ctypes.c_void_p) < 8:
        # 32-bit glibc refuses mmap thresholds above 512 KiB; and setting either threshold turns
        # off its own adjustment, which is then the better of the two.
        return "32-bit"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return "failed"
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # The mmap threshold first: were it refused, a trim threshold alone would pin the mmap
    # threshold at its 128 KiB start (any setting ends glibc's adjustment) and fault more, not less.
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        return "failed"
    return "tuned" if mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1 else "failed"
