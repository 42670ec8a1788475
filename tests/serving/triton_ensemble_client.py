"""tritonclient (http or grpc) against a server serving the pipeline "pipe" of test_ensemble.py
(IMAGE FP32 [-1, 4] -> PROBS FP32 [-1, 3], LABEL INT64 [-1]) and the broken "ghost", in a separate
process (tritonclient.grpc's proto copy cannot share a process with ``schemas.proto``), printing
one JSON report. It also asks for the top classes (class_count) of an output.

    python tests/serving/triton_ensemble_client.py http|grpc HOST:PORT
"""

from __future__ import annotations

import json
import sys

import numpy as np
from tritonclient.utils import InferenceServerException


def main(protocol: str, address: str) -> dict:
    if protocol == "http":
        import tritonclient.http as client_module
    else:
        import tritonclient.grpc as client_module
    client = client_module.InferenceServerClient(address)
    kw = {"as_json": True} if protocol == "grpc" else {}
    x = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 4
    tensor = client_module.InferInput("IMAGE", [3, 4], "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("pipe", [tensor], outputs=[client_module.InferRequestedOutput("PROBS"),
                                                     client_module.InferRequestedOutput("LABEL")])
    # Triton's classification extension, on the pipeline's output (no labels: "score:index").
    classes = client.infer("pipe", [tensor], outputs=[client_module.InferRequestedOutput("PROBS", class_count=2)])
    metadata = client.get_model_metadata("pipe", **kw)
    config = client.get_model_config("pipe", **kw)
    config = config.get("config", config)
    stats = client.get_inference_statistics("pipe", **kw)["model_stats"][0]
    try:
        client.infer("ghost", [tensor])
        missing = ""
    except InferenceServerException as exc:
        missing = str(exc.message())
    return {
        "probs": result.as_numpy("PROBS").tolist(),
        "label": result.as_numpy("LABEL").tolist(),
        "platform": metadata["platform"],
        "ready": client.is_model_ready("pipe"),
        "steps": [s["model_name"] for s in config["ensemble_scheduling"]["step"]],
        "success": int(stats["inference_stats"]["success"]["count"]),
        "missing_step_error": missing,
        "top2": [[v.decode() for v in row] for row in classes.as_numpy("PROBS").tolist()],
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
