"""Drive Triton's extensions through tritonclient (http or grpc) against a server in explicit model
control mode, in a separate process (tritonclient.grpc's proto copy cannot share a process with
``schemas.proto``), printing one JSON report of what each call gave.

    python tests/serving/triton_extensions_client.py http|grpc HOST:PORT

The server must serve model "mlp" (x FP32 [-1, 4] -> probs FP32 [-1, 3]) loaded at start, and have
model "pair" in its repository, not loaded.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import numpy as np
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException


def error_of(call, *args, **kwargs) -> str:
    try:
        call(*args, **kwargs)
    except InferenceServerException as exc:
        return str(exc.message())
    return ""


def as_dict(value) -> dict:
    if isinstance(value, (dict, list)):
        return value
    from google.protobuf import json_format

    return json_format.MessageToDict(value, preserving_proto_field_name=True)


def main(protocol: str, address: str) -> dict:
    if protocol == "http":
        import tritonclient.http as client_module
    else:
        import tritonclient.grpc as client_module
    client = client_module.InferenceServerClient(address)
    grpc = protocol == "grpc"
    json_kw = {"as_json": True} if grpc else {}
    report: dict = {}

    index = as_dict(client.get_model_repository_index(**json_kw))
    report["index_before"] = index if not grpc else index.get("models", [])
    report["pair_ready_before"] = client.is_model_ready("pair")
    client.load_model("pair")
    report["pair_ready_after_load"] = client.is_model_ready("pair")
    client.load_model("mlp", config=json.dumps({"max_batch_size": 4}))
    report["mlp_config"] = as_dict(client.get_model_config("mlp", **json_kw))
    report["load_ghost_error"] = error_of(client.load_model, "ghost")
    report["load_bad_config_error"] = error_of(client.load_model, "mlp", config=json.dumps({"max_batch_size": "many"}))
    report["mlp_ready_after_bad_load"] = client.is_model_ready("mlp")

    # System shared memory: the input and the output as regions of one object each.
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    tag = f"{protocol}_{os.getpid()}"
    in_key, out_key = f"/flowstack_in_{tag}", f"/flowstack_out_{tag}"
    in_handle = shm.create_shared_memory_region(f"in_{tag}", in_key, x.nbytes)
    out_handle = shm.create_shared_memory_region(f"out_{tag}", out_key, 2 * 3 * 4)
    try:
        shm.set_shared_memory_region(in_handle, [x])
        client.register_system_shared_memory("in", in_key, x.nbytes)
        client.register_system_shared_memory("out", out_key, 24)
        report["register_twice_error"] = error_of(client.register_system_shared_memory, "in", in_key, x.nbytes)
        report["register_too_big_error"] = error_of(client.register_system_shared_memory, "big", in_key, 4096)
        status = as_dict(client.get_system_shared_memory_status(**json_kw))
        report["shm_status"] = status if not grpc else list(status.get("regions", {}).values())
        tensor = client_module.InferInput("x", [2, 4], "FP32")
        tensor.set_shared_memory("in", x.nbytes)
        output = client_module.InferRequestedOutput("probs")
        output.set_shared_memory("out", 24)
        result = client.infer("mlp", [tensor], outputs=[output])
        report["shm_x"] = x.tolist()
        report["shm_probs"] = shm.get_contents_as_numpy(out_handle, np.float32, [2, 3]).tolist()
        report["shm_output_parameters"] = {k: v for k, v in as_dict(result.get_output("probs")).get("parameters", {}).items()}
        small = client_module.InferRequestedOutput("probs")
        small.set_shared_memory("out", 8)
        report["small_output_region_error"] = error_of(client.infer, "mlp", [tensor], outputs=[small])
        client.unregister_system_shared_memory("in")
        report["unregistered_input_error"] = error_of(client.infer, "mlp", [tensor], outputs=[output])
        client.unregister_system_shared_memory()
        status = as_dict(client.get_system_shared_memory_status(**json_kw))
        report["shm_status_after"] = status if not grpc else list(status.get("regions", {}).values())
    finally:
        shm.destroy_shared_memory_region(in_handle)
        shm.destroy_shared_memory_region(out_handle)

    report["cuda_register_error"] = error_of(client.register_cuda_shared_memory, "gpu", b"\0" * 64, 0, 64)
    report["cuda_status"] = as_dict(client.get_cuda_shared_memory_status(**json_kw))
    stats = as_dict(client.get_inference_statistics("mlp", **json_kw))
    report["stats"] = stats["model_stats"]
    report["log_settings"] = as_dict(client.get_log_settings(**json_kw))
    report["log_settings_verbose"] = as_dict(client.update_log_settings({"log_verbose_level": 1}, **json_kw))
    client.update_log_settings({"log_verbose_level": 0, "log_info": True})
    report["trace_settings"] = as_dict(client.get_trace_settings(**json_kw))
    report["trace_on_error"] = error_of(client.update_trace_settings, settings={"trace_level": ["TIMESTAMPS"]})

    if grpc:
        answers: list = []
        done = threading.Event()

        def callback(result, error):
            answers.append(("error", str(error)) if error is not None else ("ok", result.as_numpy("probs").tolist()))
            if len(answers) == 3:
                done.set()

        client.start_stream(callback)
        good = client_module.InferInput("x", [2, 4], "FP32")
        good.set_data_from_numpy(x)
        bad = client_module.InferInput("x", [2, 5], "FP32")
        bad.set_data_from_numpy(np.zeros((2, 5), np.float32))
        for tensor in (good, bad, good):
            client.async_stream_infer("mlp", [tensor])
        done.wait(30)
        client.stop_stream()
        report["stream"] = answers

    client.unload_model("pair")
    report["pair_ready_after_unload"] = client.is_model_ready("pair")
    index = as_dict(client.get_model_repository_index(**json_kw))
    report["index_after"] = index if not grpc else index.get("models", [])
    report["unknown_model_error"] = error_of(client.get_model_metadata, "ghost")
    client.close()
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
