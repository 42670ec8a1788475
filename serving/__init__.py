"""flowstack serving: a batching model server speaking KServe v2 (REST and gRPC), TensorFlow
Serving REST and Prometheus, over a polled repository of .flow models."""

from serving.backends import EdgeRuntimeBackend
from serving.batcher import DynamicBatcher
from serving.config import ConfigError, ModelConfig, VersionPolicy
from serving.core import InferenceCore, InferInput, InferOutput, InferRequest, InferResponse
from serving.errors import (
    InvalidRequest,
    ModelNotFound,
    Overloaded,
    PayloadTooLarge,
    RequestTimeout,
    ServingError,
    ShuttingDown,
)
from serving.grpc_server import GrpcSettings, create_grpc_server
from serving.http_app import HttpSettings, create_app
from serving.metrics import ServingMetrics
from serving.repository import ModelRepository
from serving.server import InferenceServer, ServerOptions, serve

__all__ = [
    "ConfigError",
    "DynamicBatcher",
    "EdgeRuntimeBackend",
    "GrpcSettings",
    "HttpSettings",
    "InferInput",
    "InferOutput",
    "InferRequest",
    "InferResponse",
    "InferenceCore",
    "InferenceServer",
    "InvalidRequest",
    "ModelConfig",
    "ModelNotFound",
    "ModelRepository",
    "Overloaded",
    "PayloadTooLarge",
    "RequestTimeout",
    "ServerOptions",
    "ServingError",
    "ServingMetrics",
    "ShuttingDown",
    "VersionPolicy",
    "create_app",
    "create_grpc_server",
    "serve",
]
