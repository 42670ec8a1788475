"""Exit statuses of a task process, chosen so that a supervisor knows whether a restart can help.

The Kubeflow training operator's ``restartPolicy: ExitCode`` restarts a pod whose container exits
with 128-255 (retryable: killed by a signal, or a failure a restart can cure) and gives up on 1-127
(permanent: a bug or a bad configuration that the same pod would hit again). ``flowstack cluster
launch --max-restarts`` applies the same rule, so a job behaves alike on a laptop and on Kubernetes.
"""

from __future__ import annotations

__all__ = ["BAD_CONFIG", "OK", "PEER_UNAVAILABLE", "TASK_FAILED", "TIMED_OUT", "is_retryable"]

OK = 0
TASK_FAILED = 1          # an exception in the user's program: permanent
BAD_CONFIG = 2           # a malformed TF_CONFIG or command line: permanent
TIMED_OUT = 124          # the job outlived the launcher's --timeout: permanent
PEER_UNAVAILABLE = 138   # a peer task died or restarted mid-step: retryable, restore and go on


def is_retryable(status: int) -> bool:
    """Whether a task that exited with ``status`` (negative: killed by that signal) should be restarted."""
    return status < 0 or 128 <= status <= 255
