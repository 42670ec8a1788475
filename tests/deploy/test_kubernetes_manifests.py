"""The Kubernetes manifests of deploy/kubernetes/ are valid, agree with each other and with the code.

Built-in kinds are validated against the Kubernetes API's JSON schemas (``kubernetes-validate``,
strict: an unknown or misspelled field fails); a TFJob against the Kubeflow training operator's
API models (``kubeflow-training``), with its pod templates against the Kubernetes schemas; KServe's
resources by their pod-level parts (containers against the Kubernetes schema) and the fields of
KServe's API reference. The plain variant must give every pod the TF_CONFIG the operator would
inject for the TFJob, and both must restart exactly the exit codes ``exit_codes`` calls retryable.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from trainer.distributed import exit_codes
from trainer.distributed.pod_config import tf_config_from_pod

yaml = pytest.importorskip("yaml")
kubernetes_validate = pytest.importorskip("kubernetes_validate")
training_models = pytest.importorskip("kubeflow.training.models")
kubernetes_client = pytest.importorskip("kubernetes.client")

from referencing import Registry, Resource  # noqa: E402
import jsonschema  # noqa: E402
from kubernetes_validate.utils import schema_contents  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.33.0"   # Indexed Jobs' backoffLimitPerIndex is GA from 1.33
BUILT_IN_API_GROUPS = ("v1", "apps/v1", "batch/v1")


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def all_documents() -> list[tuple[str, dict]]:
    return [(f"{p.relative_to(DEPLOY)}:{d['kind']}/{d['metadata']['name']}", d)
            for p in sorted(DEPLOY.rglob("*.yaml")) for d in documents(p)]


def find(path: str, kind: str, name: str | None = None) -> dict:
    matches = [d for d in documents(DEPLOY / path) if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(matches) == 1, f"{path}: expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


# --- validation against the API definitions -------------------------------------------------------

def validate_fragment(data: dict, definition: str) -> None:
    """Validate part of an object (a pod template, a container) against its Kubernetes schema file."""
    schema_dir = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"
    schema = schema_contents(f"{schema_dir}/{definition}.json", KUBERNETES_VERSION)
    definitions = schema_contents(f"{schema_dir}/_definitions.json", KUBERNETES_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    jsonschema.validators.Draft202012Validator(schema, registry=registry).validate(data)


def _model_class(name: str):
    return getattr(training_models, name, None) or getattr(kubernetes_client, name)


def build_model(type_name: str, value, where: str):
    """``value`` as the OpenAPI model ``type_name``; unknown fields and wrong types fail naming ``where``."""
    if type_name.startswith("list["):
        assert isinstance(value, list), f"{where}: expected a list, got {value!r}"
        return [build_model(type_name[5:-1], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if type_name.startswith("dict("):
        assert isinstance(value, dict), f"{where}: expected a mapping, got {value!r}"
        item_type = type_name[5:-1].split(", ", 1)[1]
        return {k: build_model(item_type, v, f"{where}.{k}") for k, v in value.items()}
    scalars = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}
    if type_name in scalars:
        assert isinstance(value, scalars[type_name]), f"{where}: expected {type_name}, got {value!r}"
        return value
    cls = _model_class(type_name)
    assert isinstance(value, dict), f"{where}: expected a {type_name} mapping, got {value!r}"
    fields = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    unknown = sorted(set(value) - set(fields))
    assert not unknown, f"{where}: {type_name} has no field(s) {unknown}"
    return cls(**{fields[k]: build_model(cls.openapi_types[fields[k]], v, f"{where}.{k}") for k, v in value.items()})


@pytest.mark.parametrize("doc", [pytest.param(doc, id=where) for where, doc in all_documents()
                                 if doc["apiVersion"] in BUILT_IN_API_GROUPS])
def test_built_in_resources_validate_against_the_kubernetes_schema(doc):
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_validation_catches_a_misspelled_field():
    job = find("plain/distributed-digits.yaml", "Job", "digits-worker")
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
    tfjob = find("tfjob/distributed-digits.yaml", "TFJob")
    tfjob["spec"]["tfReplicaSpecs"]["PS"]["replica"] = 1
    with pytest.raises(AssertionError, match="has no field"):
        build_model("KubeflowOrgV1TFJob", tfjob, "TFJob")


def test_tfjob_matches_the_training_operator_api():
    tfjob = find("tfjob/distributed-digits.yaml", "TFJob")
    assert tfjob["apiVersion"] == "kubeflow.org/v1"
    model = build_model("KubeflowOrgV1TFJob", tfjob, "TFJob")
    assert set(model.spec.tf_replica_specs) <= {"Chief", "Master", "PS", "Worker", "Evaluator"}
    assert model.spec.run_policy.clean_pod_policy in ("All", "Running", "None")
    for rtype, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        # ExitCode: the operator restarts 128-255 and fails the job on 1-127, as exit_codes says.
        assert spec["restartPolicy"] == "ExitCode", rtype
        validate_fragment(spec["template"], "podtemplatespec-v1")
        container = spec["template"]["spec"]["containers"][0]
        assert container["name"] == "tensorflow", f"{rtype}: the operator only configures a container named tensorflow"


def test_kserve_resources_use_kserve_fields_and_valid_containers():
    runtime = find("serving/kserve.yaml", "ServingRuntime")
    assert runtime["apiVersion"] == "serving.kserve.io/v1alpha1"
    assert set(runtime["spec"]) <= {"supportedModelFormats", "protocolVersions", "multiModel", "containers",
                                    "disabled", "grpcDataEndpoint", "grpcEndpoint", "httpDataEndpoint",
                                    "annotations", "labels", "nodeSelector", "tolerations", "volumes"}
    assert set(runtime["spec"]["protocolVersions"]) <= {"v1", "v2", "grpc-v1", "grpc-v2"}
    for container in runtime["spec"]["containers"]:
        validate_fragment(container, "container-v1")
    assert runtime["spec"]["containers"][0]["name"] == "kserve-container"
    formats = {f["name"] for f in runtime["spec"]["supportedModelFormats"]}

    service = find("serving/kserve.yaml", "InferenceService")
    assert service["apiVersion"] == "serving.kserve.io/v1beta1"
    model = service["spec"]["predictor"]["model"]
    assert set(model) <= {"modelFormat", "runtime", "protocolVersion", "storageUri", "args", "env", "resources"}
    assert model["modelFormat"]["name"] in formats and model["runtime"] == runtime["metadata"]["name"]
    assert model["protocolVersion"] in runtime["spec"]["protocolVersions"]
    assert "--model-repository" in runtime["spec"]["containers"][0]["args"]
    repo_arg = runtime["spec"]["containers"][0]["args"]
    assert repo_arg[repo_arg.index("--model-repository") + 1] == "/mnt/models"   # where KServe puts storageUri


# --- agreement with the code ------------------------------------------------------------------------

def operator_tf_config(tfjob: dict, rtype: str, index: int, namespace: str) -> str:
    """What the Kubeflow training operator injects (its genTFConfigJSONStr, restated): Go's JSON of
    {cluster, task, environment}, map keys sorted, evaluators left out of the cluster."""
    cluster = {}
    for replica_type, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        rt = replica_type.lower()
        if rt == "evaluator":
            continue
        ports = [p["containerPort"] for c in spec["template"]["spec"]["containers"] if c["name"] == "tensorflow"
                 for p in c.get("ports", []) if p.get("name") == "tfjob-port"]
        port = ports[0] if ports else 2222
        cluster[rt] = [f"{tfjob['metadata']['name']}-{rt}-{i}.{namespace}.svc:{port}" for i in range(spec["replicas"])]
    config = {"cluster": dict(sorted(cluster.items())), "task": {"type": rtype, "index": index}, "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))


def pod_environment(job: dict, index: int, namespace: str) -> dict[str, str]:
    """The environment Kubernetes gives pod ``index`` of an Indexed Job (the fields this manifest uses)."""
    env = {"JOB_COMPLETION_INDEX": str(index)}
    for var in job["spec"]["template"]["spec"]["containers"][0].get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            assert var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace", var
            env[var["name"]] = namespace
    return env


@pytest.mark.parametrize("namespace", ["default", "ml-team"])
def test_plain_variant_builds_the_tf_config_the_operator_injects(namespace):
    tfjob = find("tfjob/distributed-digits.yaml", "TFJob")
    plain = documents(DEPLOY / "plain" / "distributed-digits.yaml")
    jobs = {d["metadata"]["name"]: d for d in plain if d["kind"] == "Job"}
    services = {d["metadata"]["name"]: d for d in plain if d["kind"] == "Service"}
    checked = 0
    for replica_type, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        rt = replica_type.lower()
        job = jobs[f"digits-{rt}"]
        assert job["spec"]["completionMode"] == "Indexed"
        assert job["spec"]["completions"] == job["spec"]["parallelism"] == spec["replicas"]
        for index in range(spec["replicas"]):
            assert tf_config_from_pod(pod_environment(job, index, namespace)) == \
                operator_tf_config(tfjob, rt, index, namespace)
            service = services[f"digits-{rt}-{index}"]        # the host name in TF_CONFIG resolves
            assert service["spec"]["clusterIP"] == "None"
            assert service["spec"]["selector"] == {"batch.kubernetes.io/job-name": f"digits-{rt}",
                                                   "batch.kubernetes.io/job-completion-index": str(index)}
            checked += 1
    assert checked == sum(s["replicas"] for s in tfjob["spec"]["tfReplicaSpecs"].values())
    assert len(services) == checked


def test_both_variants_run_the_same_program():
    tfjob = find("tfjob/distributed-digits.yaml", "TFJob")
    for rtype, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        tf_command = spec["template"]["spec"]["containers"][0]["command"]
        plain = find("plain/distributed-digits.yaml", "Job", f"digits-{rtype.lower()}")
        command = plain["spec"]["template"]["spec"]["containers"][0]["command"]
        assert command[:4] == ["flowstack", "cluster", "pod-exec", "--"] and command[4:] == tf_command
        script = Path(tf_command[1].replace("/opt/flowstack/", f"{ROOT}/"))
        assert script.is_file(), f"{rtype} runs {tf_command[1]}, which the image would not hold"


def test_plain_jobs_restart_exactly_the_retryable_exit_codes():
    for job in (d for d in documents(DEPLOY / "plain" / "distributed-digits.yaml") if d["kind"] == "Job"):
        rules = job["spec"]["podFailurePolicy"]["rules"]
        fail_job = [r for r in rules if r["action"] == "FailJob" and "onExitCodes" in r]
        assert len(fail_job) == 1 and fail_job[0]["onExitCodes"]["operator"] == "In"
        permanent = set(fail_job[0]["onExitCodes"]["values"])
        for status in range(1, 256):
            assert (status not in permanent) == exit_codes.is_retryable(status), (job["metadata"]["name"], status)
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"   # podFailurePolicy requires it
        assert job["spec"]["backoffLimitPerIndex"] >= 1


def test_serving_probes_name_routes_the_server_answers():
    from serving.http_app import OPEN_PATHS

    deployment = find("serving/deployment.yaml", "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"] in OPEN_PATHS, probe   # answered without a token
    command = container["command"]
    lame_duck = float(command[command.index("--lame-duck") + 1])
    drain = float(command[command.index("--drain-timeout") + 1])
    assert pod["terminationGracePeriodSeconds"] > lame_duck + drain
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert str(ports["http"]) == command[command.index("--http-port") + 1]
    assert str(ports["grpc"]) == command[command.index("--grpc-port") + 1]
    runtime = find("serving/kserve.yaml", "ServingRuntime")["spec"]["containers"][0]
    for probe in ("livenessProbe", "readinessProbe"):
        assert runtime[probe]["httpGet"]["path"] in OPEN_PATHS, probe


@pytest.mark.slow
def test_dockerfile_builds_the_image():
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("Docker is not available on this machine: the image build is checked only where it is")
    result = subprocess.run([docker, "build", "-f", str(DEPLOY / "Dockerfile"), "-t", "flowstack:test", str(ROOT)],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-4000:]
