"""Failures a request can meet, each with the HTTP status and gRPC code both protocols report."""

from __future__ import annotations

import grpc


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
