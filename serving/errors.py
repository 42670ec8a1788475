"""Failures a request can meet, each with the HTTP status and gRPC code both protocols report."""

from __future__ import annotations

import reprlib
from typing import Any

import grpc

# How much of a client-sent value an error message echoes: enough to recognize it, never so much
# that an error body grows as large as the request that caused it.
ECHO_LIMIT = 200


# reprlib bounds the work (no repr of a million-element list is built only to be cut); its limits
# are past ECHO_LIMIT so that ``clipped`` makes the cut and the result always ends in '...'.
_ECHO = reprlib.Repr()
_ECHO.maxstring = _ECHO.maxlong = _ECHO.maxother = 2 * ECHO_LIMIT
_ECHO.maxlist = _ECHO.maxtuple = _ECHO.maxdict = _ECHO.maxset = _ECHO.maxfrozenset = ECHO_LIMIT // 2


def clipped(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, ending in '...' where it was cut.

    >>> clipped("abcdef", 5)
    'ab...'
    """
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown(value: Any) -> str:
    """A client-sent value as an error message echoes it: its repr, clipped to ``ECHO_LIMIT``.

    >>> shown("x")
    "'x'"
    >>> len(shown("x" * 10_000)), shown([0] * 10_000)[-8:]
    (200, ' 0, 0...')
    """
    return clipped(_ECHO.repr(value))


class ConfigError(ValueError):
    """A config.json that cannot be used: names the file and the field."""


class ServingError(Exception):
    """Base class: a message the client can act on, plus how each protocol reports it."""

    http_status = 500
    grpc_code = grpc.StatusCode.INTERNAL


class InvalidRequest(ServingError):
    """The request is malformed or does not fit the model: names the input and the problem."""

    http_status = 400
    grpc_code = grpc.StatusCode.INVALID_ARGUMENT


class ModelNotFound(ServingError):
    """No such model, or no such version being served."""

    http_status = 404
    grpc_code = grpc.StatusCode.NOT_FOUND


class Overloaded(ServingError):
    """The model's queue is full: retry later (HTTP 503 with Retry-After, gRPC UNAVAILABLE)."""

    http_status = 503
    grpc_code = grpc.StatusCode.UNAVAILABLE
    retry_after_s = 1


class RequestTimeout(ServingError):
    """The request waited in the queue longer than its ``timeout`` parameter allowed."""

    http_status = 503
    grpc_code = grpc.StatusCode.DEADLINE_EXCEEDED


class ShuttingDown(ServingError):
    """The server (or this model version) no longer accepts requests."""

    http_status = 503
    grpc_code = grpc.StatusCode.UNAVAILABLE


class PayloadTooLarge(ServingError):
    """The request body is over the configured size limit."""

    http_status = 413
    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class VersionRetired(ShuttingDown):
    """Internal: the version object was swapped out between lookup and submit; look it up again."""


class Unsupported(ServingError):
    """A protocol feature this server (or this device) does not offer: says which, and what would."""

    http_status = 400
    grpc_code = grpc.StatusCode.FAILED_PRECONDITION
