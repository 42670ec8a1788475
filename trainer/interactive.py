"""The default session: ``InteractiveSession`` installs itself so ``tensor.eval()`` needs no session."""

from __future__ import annotations

from trainer.default_session import default_session_stack
from trainer.session import Session

__all__ = ["InteractiveSession", "get_default_session"]

_installed: list = []  # InteractiveSessions, process-wide (TensorFlow's is the thread's, set from any)


def get_default_session() -> Session | None:
    """The innermost ``with sess:`` / ``with sess.as_default():`` session of this thread, else the
    open InteractiveSession."""
    stack = default_session_stack()
    if stack:
        return stack[-1]
    return _installed[-1] if _installed else None


class InteractiveSession(Session):
    """A Session that is the default until closed: ``x.eval()``, ``op.run()`` use it."""

    def __init__(self, target: str = "", graph=None, config=None, **kwargs):
        super().__init__(graph, target=target, config=config, **kwargs)
        _installed.append(self)

    def close(self) -> None:
        if self in _installed:
            _installed.remove(self)
        super().close()


def eval_tensor(tensor, feed_dict=None, session=None):
    """``tensor.eval()``: run it in ``session`` or the default session."""
    sess = session or get_default_session()
    if sess is None:
        raise ValueError(f"cannot evaluate {getattr(tensor, 'name', tensor)}: no session given and no default "
                         "session (create an InteractiveSession, or pass session=)")
    return sess.run(tensor, feed_dict)
