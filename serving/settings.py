"""Triton's log and trace settings (``/v2/logging``, ``/v2/trace/setting``, gRPC LogSettings and
TraceSetting), shared by both front ends so they answer alike.

Logging maps onto Python's logging: ``log_verbose_level`` > 0 is DEBUG, else ``log_info`` on is
INFO, else ``log_warning`` on is WARNING, else ERROR. The server writes its log to stderr only,
and it has no request tracing: ``log_file`` other than "" and ``trace_level`` other than OFF are
refused, naming the setting.
"""

from __future__ import annotations

import logging
from typing import Any

from serving.errors import InvalidRequest, Unsupported, shown

LOG_SETTINGS = ("log_file", "log_info", "log_warning", "log_error", "log_verbose_level", "log_format")
TRACE_SETTINGS = {"trace_level": ["OFF"], "trace_rate": ["1000"], "trace_count": ["-1"], "log_frequency": ["0"],
                  "trace_file": [""], "trace_mode": ["triton"]}


def log_settings() -> dict[str, Any]:
    level = logging.getLogger().getEffectiveLevel()
    return {
        "log_file": "",
        "log_info": level <= logging.INFO,
        "log_warning": level <= logging.WARNING,
        "log_error": level <= logging.ERROR,
        "log_verbose_level": 1 if level <= logging.DEBUG else 0,
        "log_format": "default",
    }


def update_log_settings(changes: dict[str, Any]) -> dict[str, Any]:
    """Apply ``changes`` (any of ``LOG_SETTINGS``); returns the settings after."""
    unknown = sorted(set(changes) - set(LOG_SETTINGS))
    if unknown:
        raise InvalidRequest(f"unknown log setting(s) {shown(unknown)}; the settings are {list(LOG_SETTINGS)}")
    current = {**log_settings(), **changes}
    for name in ("log_info", "log_warning", "log_error"):
        if not isinstance(current[name], bool):
            raise InvalidRequest(f"log setting {name!r} must be a boolean, got {shown(current[name])}")
    verbose = current["log_verbose_level"]
    if isinstance(verbose, bool) or not isinstance(verbose, int) or verbose < 0:
        raise InvalidRequest(f"log setting 'log_verbose_level' must be a non-negative integer, got {shown(verbose)}")
    if current["log_file"] not in ("", None):
        raise Unsupported("log setting 'log_file': this server logs to stderr only (redirect it, or set \"\")")
    if current["log_format"] not in ("default", "ISO8601"):
        raise InvalidRequest(f"log setting 'log_format' must be 'default' or 'ISO8601', got {shown(current['log_format'])}")
    if verbose > 0:
        level = logging.DEBUG
    elif current["log_info"]:
        level = logging.INFO
    elif current["log_warning"]:
        level = logging.WARNING
    else:
        level = logging.ERROR
    logging.getLogger().setLevel(level)
    return log_settings()


def trace_settings(model: str = "") -> dict[str, list[str]]:
    return {name: list(value) for name, value in TRACE_SETTINGS.items()}


def update_trace_settings(changes: dict[str, Any], model: str = "") -> dict[str, list[str]]:
    """Tracing stays off: setting ``trace_level`` to anything but OFF is refused; other known
    settings may be given with their current values."""
    unknown = sorted(set(changes) - set(TRACE_SETTINGS))
    if unknown:
        raise InvalidRequest(f"unknown trace setting(s) {shown(unknown)}; the settings are {list(TRACE_SETTINGS)}")
    level = changes.get("trace_level")
    levels = [level] if isinstance(level, str) else list(level or [])
    if any(str(v).upper() != "OFF" for v in levels):
        raise Unsupported(f"trace_level {shown(levels)}: this server has no request tracing (only OFF)")
    return trace_settings(model)
