"""deploy/kubernetes/, validated offline: every resource against the Kubernetes API's own
schemas (kubernetes-validate bundles them; strict, so an unknown field is an error too), for
the oldest and the newest release checked here; a broken copy is refused, so the check can
fail. Then what the schemas cannot say: the pieces name each other correctly (selectors,
ports, the Secret's keys, the ConfigMap, the HPA's target), the Deployment probes /readyz and
/healthz on the admin port and runs non-root on a read-only root, the ConfigMap holds
examples/replicas.yaml verbatim, and the placeholders are marked as such."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from kubernetes_validate import utils as kv

from hopline.config.state import key_problem
from tests.deploy.deploy_files import MANIFESTS, REPLICAS, manifest_files, resource, resources

VERSIONS = ("1.30.0", kv.latest_version())  # the oldest release still in wide use, and the newest bundled


def validate(doc: dict, version: str) -> None:
    """Raise if ``doc`` is not a valid resource of ``version``; a kind without a schema is an error too."""
    kv.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", manifest_files(), ids=[p.name for p in manifest_files()])
def test_manifest_is_valid(path: Path, version: str):
    docs = resources([path])
    assert docs, f"{path.name} holds no resource"
    for doc in docs:
        validate(doc, version)


def test_a_wrong_field_type_or_an_unknown_field_is_refused():
    deployment = resource("Deployment", "hopline")
    validate(deployment, VERSIONS[-1])
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["replicas"] = "three"
    with pytest.raises(kv.ValidationError, match="'three' is not of type 'integer'"):
        validate(wrong_type, VERSIONS[-1])
    unknown = copy.deepcopy(deployment)
    unknown["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    with pytest.raises(kv.ValidationError, match="paht"):
        validate(unknown, VERSIONS[-1])
    with pytest.raises(kv.SchemaNotFoundError):
        validate({**deployment, "apiVersion": "apps/v1beta9"}, VERSIONS[-1])


def test_a_broken_file_fails_the_same_check(tmp_path):
    """The parametrized check above, on a copy of service.yaml with a port as a word."""
    broken = tmp_path / "service.yaml"
    broken.write_text((MANIFESTS / "service.yaml").read_text().replace("port: 8000", "port: eight-thousand"))
    with pytest.raises(kv.ValidationError):
        test_manifest_is_valid(broken, VERSIONS[-1])


def test_kustomization_lists_every_manifest_but_the_example_secret():
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    # `kubectl apply -k` must not overwrite the Secret the operator made with the placeholders
    assert sorted(kustomization["resources"]) == [p.name for p in manifest_files() if p.name != "secret.example.yaml"]
    assert [i["name"] for i in kustomization["images"]] == ["hopline"]
    assert "secretGenerator" not in kustomization and not [r for r in resources([MANIFESTS / n for n in kustomization["resources"]]) if r["kind"] == "Secret"]


def pod(name: str) -> dict:
    return resource("Deployment", name)["spec"]["template"]


def test_the_deployment_runs_three_probed_non_root_replicas():
    deployment = resource("Deployment", "hopline")
    assert deployment["spec"]["replicas"] == 3
    template = pod("hopline")
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    spec = template["spec"]
    (container,) = spec["containers"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert {p["name"] for p in container["ports"]} == {"mcp", "admin"}
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    sc = container["securityContext"]
    assert (
        sc["readOnlyRootFilesystem"] is True
        and sc["allowPrivilegeEscalation"] is False
        and sc["capabilities"] == {"drop": ["ALL"]}
    )
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/tmp"}  # temporary files; nothing else is written


def test_redis_url_and_the_session_key_come_from_the_secret():
    (container,) = pod("hopline")["spec"]["containers"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert set(env) == {"REDIS_URL", "HOPLINE_SESSION_KEY"}  # the only variables examples/replicas.yaml needs
    for name, ref in env.items():
        assert ref["key"] in resource("Secret", ref["name"])["stringData"], name


def test_the_secret_is_a_marked_placeholder_and_not_a_usable_key():
    text = (MANIFESTS / "secret.example.yaml").read_text()
    assert text.startswith("# EXAMPLE ONLY, with PLACEHOLDER values")
    key = resource("Secret", "hopline-secrets")["stringData"]["HOPLINE_SESSION_KEY"]
    assert key.startswith("REPLACE-ME")
    # a published key must not be a valid one: the gateway's own check refuses it
    assert key_problem(key) is not None
    assert key_problem("A" * 43) is None  # (the check accepts a real one)


def test_the_configmap_holds_examples_replicas_yaml_verbatim():
    (volume,) = [v for v in pod("hopline")["spec"]["volumes"] if v["name"] == "config"]
    data = resource("ConfigMap", volume["configMap"]["name"])["data"]
    assert data == {"hopline.yaml": REPLICAS.read_text()}, (
        "deploy/kubernetes/configmap.yaml and examples/replicas.yaml differ"
    )


def test_the_service_reaches_the_mcp_port_of_any_replica_without_affinity():
    service = resource("Service", "hopline")
    assert service["spec"]["selector"].items() <= pod("hopline")["metadata"]["labels"].items()
    assert service["spec"]["sessionAffinity"] == "None"
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(8000, "mcp")]  # not the admin port


def test_the_autoscaler_and_the_disruption_budget_cover_the_deployment():
    hpa = resource("HorizontalPodAutoscaler", "hopline")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "hopline"}
    assert (
        hpa["spec"]["minReplicas"]
        == resource("Deployment", "hopline")["spec"]["replicas"]
        <= hpa["spec"]["maxReplicas"]
    )
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"  # of the container's cpu request, which it has
    pdb = resource("PodDisruptionBudget", "hopline")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod("hopline")["metadata"]["labels"].items()
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]  # a drain can proceed


def test_the_reference_redis_is_marked_and_is_what_the_secret_points_at():
    assert (MANIFESTS / "redis.yaml").read_text().startswith("# REFERENCE ONLY")
    (container,) = pod("hopline-redis")["spec"]["containers"]
    assert container["image"].split(":")[0] == "redis"  # the official image
    service = resource("Service", "hopline-redis")
    assert service["spec"]["selector"].items() <= pod("hopline-redis")["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    url = resource("Secret", "hopline-secrets")["stringData"]["REDIS_URL"]
    assert url == f"redis://{service['metadata']['name']}:{port['port']}/0"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod("hopline-redis")["spec"]["securityContext"]["runAsNonRoot"] is True
