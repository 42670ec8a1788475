"""The distributed runtime: one graph program on the parameter-server and worker tasks of a cluster.

``trainer.train`` re-exports the TF 1.x names (``ClusterSpec``, ``TFConfigClusterResolver``,
``Server``); ``Session(target=server.target)`` runs a graph whose nodes live on several tasks.
``Server`` is loaded on first use: it needs grpcio (the ``distributed`` extra), the rest does not.
"""

from trainer.distributed.cluster import ClusterConfigError, ClusterSpec, TFConfigClusterResolver
from trainer.distributed.errors import (AbortedError, DeadlineExceededError, DistributedError, StaleIncarnationError,
                                        UnavailableError, UnknownTaskError)

__all__ = ["AbortedError", "ClusterConfigError", "ClusterSpec", "DeadlineExceededError", "DistributedError", "Server",
           "StaleIncarnationError", "TFConfigClusterResolver", "UnavailableError", "UnknownTaskError"]


def __getattr__(name: str):
    if name == "Server":
        from trainer.distributed.server import Server

        return Server
    raise AttributeError(f"module 'trainer.distributed' has no attribute {name!r}")
