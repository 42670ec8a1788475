"""tritonclient.http.aio or tritonclient.grpc.aio against a server in explicit model control mode, in
a separate process (see triton_extensions_client.py), printing one JSON report.

    python tests/serving/triton_aio_client.py http|grpc HOST:PORT
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import numpy as np
import tritonclient.utils.shared_memory as shm


def as_dict(value):
    if isinstance(value, (dict, list)):
        return value
    from google.protobuf import json_format

    return json_format.MessageToDict(value, preserving_proto_field_name=True)


async def main(protocol: str, address: str) -> dict:
    if protocol == "http":
        import tritonclient.http.aio as client_module
    else:
        import tritonclient.grpc.aio as client_module
    client = client_module.InferenceServerClient(address)
    kw = {"as_json": True} if protocol == "grpc" else {}
    report: dict = {"live": await client.is_server_live(), "ready": await client.is_server_ready()}
    await client.load_model("pair")
    report["pair_ready"] = await client.is_model_ready("pair")
    index = as_dict(await client.get_model_repository_index(**kw))
    report["index"] = index if protocol == "http" else index.get("models", [])
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    tensor = client_module.InferInput("x", [2, 4], "FP32")
    tensor.set_data_from_numpy(x)
    results = await asyncio.gather(*[client.infer("mlp", [tensor]) for _ in range(8)])
    report["x"] = x.tolist()
    report["probs"] = [r.as_numpy("probs").tolist() for r in results]
    key = f"/flowstack_aio_{protocol}_{os.getpid()}"
    handle = shm.create_shared_memory_region("aio", key, x.nbytes)
    try:
        shm.set_shared_memory_region(handle, [x])
        await client.register_system_shared_memory("aio_in", key, x.nbytes)
        region_input = client_module.InferInput("x", [2, 4], "FP32")
        region_input.set_shared_memory("aio_in", x.nbytes)
        report["shm_probs"] = (await client.infer("mlp", [region_input])).as_numpy("probs").tolist()
        status = as_dict(await client.get_system_shared_memory_status(**kw))
        report["shm_regions"] = len(status) if protocol == "http" else len(status.get("regions", {}))
        await client.unregister_system_shared_memory("aio_in")
    finally:
        shm.destroy_shared_memory_region(handle)
    stats = as_dict(await client.get_inference_statistics("mlp", **kw))
    report["inference_count"] = int(stats["model_stats"][0]["inference_count"])
    config = as_dict(await client.get_model_config("mlp", **kw))
    report["max_batch_size"] = config.get("config", config)["max_batch_size"]
    await client.unload_model("pair")
    report["pair_ready_after_unload"] = await client.is_model_ready("pair")
    await client.close()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
