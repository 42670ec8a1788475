"""What outlives a step (``SessionState``) and what one ``Session.run`` call shares (``RunContext``).

A stateful kernel (``trainer/kernels/training.py``) has the forward-kernel signature with a
leading ``RunContext``: ``fn(rctx, *inputs, xp, **attrs)``; the executor passes the context of
the current run.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["RunContext", "SessionState"]


class SessionState:
    """What outlives a step: variable buffers, queues, random state. One per Session."""

    def __init__(self):
        self.variables: dict[str, np.ndarray] = {}
        self.resources: dict[str, object] = {}
        self.lock = threading.RLock()
        self.rng = np.random.default_rng()


class RunContext:
    """What one ``Session.run`` call shares among its kernels: session state and step-local state.

    ``session`` is the running session (kernels use its public ``device(name)``), ``step`` a dict
    of step-local values (loop stacks, restore caches), ``rendezvous`` the step's Send/Recv
    mailbox (None for single-partition plans).
    """

    __slots__ = ("state", "session", "step", "rendezvous")

    def __init__(self, session, rendezvous=None):
        self.session = session
        self.state: SessionState = session.state
        self.step: dict = {}
        self.rendezvous = rendezvous
