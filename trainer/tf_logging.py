"""``tf.logging``: TensorFlow 1.x's logging calls over Python's ``logging`` (logger "tensorflow")."""

from __future__ import annotations

import logging as _pylogging
import threading

__all__ = [
    "DEBUG", "ERROR", "FATAL", "INFO", "WARN", "debug", "error", "fatal", "get_verbosity", "info", "log",
    "log_every_n", "log_first_n", "log_if", "set_verbosity", "vlog", "warn", "warning",
]

DEBUG, INFO, WARN, ERROR, FATAL = (_pylogging.DEBUG, _pylogging.INFO, _pylogging.WARNING, _pylogging.ERROR,
                                   _pylogging.CRITICAL)
_logger = _pylogging.getLogger("tensorflow")
_counts: dict = {}
_lock = threading.Lock()


def set_verbosity(v: int) -> None:
    """Log at ``v`` and above to stderr as TensorFlow does (``INFO:tensorflow:message``)."""
    _logger.setLevel(v)
    if not _logger.handlers:
        handler = _pylogging.StreamHandler()
        handler.setFormatter(_pylogging.Formatter("%(levelname)s:tensorflow:%(message)s"))
        _logger.addHandler(handler)
        _logger.propagate = False


def get_verbosity() -> int:
    return _logger.getEffectiveLevel()


def log(level: int, msg, *args, **kwargs) -> None:
    _logger.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    _logger.debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    _logger.info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    _logger.warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    _logger.error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    _logger.critical(msg, *args, **kwargs)


def vlog(level: int, msg, *args, **kwargs) -> None:
    _logger.log(level, msg, *args, **kwargs)


def log_if(level: int, msg, condition: bool, *args) -> None:
    if condition:
        _logger.log(level, msg, *args)


def _nth(key, n: int) -> int:
    with _lock:
        count = _counts[key] = _counts.get(key, 0) + 1
    return count


def log_every_n(level: int, msg, n: int, *args) -> None:
    """Log on the 1st, (n+1)th, (2n+1)th... call from this message."""
    if (_nth(("every", msg), n) - 1) % n == 0:
        _logger.log(level, msg, *args)


def log_first_n(level: int, msg, n: int, *args) -> None:
    if _nth(("first", msg), n) <= n:
        _logger.log(level, msg, *args)
