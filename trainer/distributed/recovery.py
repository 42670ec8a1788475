"""What a task does when a peer fails: which errors mean that, and how the task leaves.

A step that fails because another task died, hung or restarted (``is_peer_failure``) cannot be
retried in place: the partitions registered there, and on a PS the variables, are gone. The task
leaves with ``exit_codes.PEER_UNAVAILABLE`` (``leave_for_restart``), a status that the launcher and
the Kubeflow training operator's ``restartPolicy: ExitCode`` restart; the restarted task registers
anew, the chief restores the last checkpoint, and training resumes from its step. No user code is
involved: ``MonitoredTrainingSession`` does this when such an error leaves its ``with`` block.
"""

from __future__ import annotations

import sys

from trainer.distributed.errors import (DeadlineExceededError, StaleIncarnationError, UnavailableError,
                                        UnknownHandleError)
from trainer.distributed.exit_codes import PEER_UNAVAILABLE

__all__ = ["PEER_FAILURES", "is_peer_failure", "leave_for_restart"]

# A peer is gone (Unavailable), restarted (StaleIncarnation, UnknownHandle) or hung past a deadline.
PEER_FAILURES = (UnavailableError, StaleIncarnationError, UnknownHandleError, DeadlineExceededError)


def is_peer_failure(error: BaseException | None) -> bool:
    return isinstance(error, PEER_FAILURES)


def leave_for_restart(task: str, error: BaseException) -> None:
    """Say why on stderr and exit with ``PEER_UNAVAILABLE`` (raises ``SystemExit``)."""
    print(f"{task}: a peer task failed or restarted ({type(error).__name__}: {error}); exiting with status "
          f"{PEER_UNAVAILABLE} so that the launcher restarts this task, which resumes from the last checkpoint",
          file=sys.stderr, flush=True)
    raise SystemExit(PEER_UNAVAILABLE) from error
