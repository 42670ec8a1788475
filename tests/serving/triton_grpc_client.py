"""Run tritonclient.grpc against a server in a separate process, printing one JSON report.

tritonclient registers its own copy of the KServe proto under the same ``inference.*`` names as
``schemas.proto``; one process cannot import both, so the tests run this file as a subprocess.

    python tests/serving/triton_grpc_client.py HOST:PORT
"""

from __future__ import annotations

import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


def main(address: str) -> dict:
    client = grpcclient.InferenceServerClient(address)
    report: dict = {
        "live": client.is_server_live(),
        "ready": client.is_server_ready(),
        "model_ready": client.is_model_ready("mlp"),
        "server_name": client.get_server_metadata().name,
    }
    meta = client.get_model_metadata("mlp", as_json=True)
    report["inputs"] = meta["inputs"]
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    tensor = grpcclient.InferInput("x", [3, 4], "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("mlp", [tensor], outputs=[grpcclient.InferRequestedOutput("probs")], request_id="g1",
                          client_timeout=10)
    report["x"] = x.tolist()
    report["probs"] = result.as_numpy("probs").tolist()
    report["id"] = result.get_response().id
    bad = grpcclient.InferInput("x", [3, 5], "FP32")
    bad.set_data_from_numpy(np.zeros((3, 5), np.float32))
    try:
        client.infer("mlp", [bad])
    except InferenceServerException as exc:
        report["error_status"] = exc.status()
        report["error_message"] = exc.message()
    client.close()
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
