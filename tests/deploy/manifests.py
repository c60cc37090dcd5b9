"""Checks every rendering of ``deploy/`` must pass (the Helm chart and each Kustomize
overlay): each object valid against the Kubernetes schemas, probes on paths the app
serves, env names that are settings, workers reachable from gateways only, Services
and autoscalers pointing at what exists, autoscalers on metrics the platform exports,
workers in the pool, and TLS on the pool's hop either off or whole on both roles.

The renderers and the schemas are registry packages (the ``deploy`` extra); without
them the tests skip, or fail where services are required (CI)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import AliasChoices, AliasPath, BaseModel

from modelport.config import Role, Settings
from tests.conftest import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# The Kubernetes versions every object is validated against: the oldest the chart admits
# (Chart.yaml's kubeVersion) and a current one.
KUBERNETES_VERSIONS = ("1.29", "1.33")
# Variables that are not modelport's settings but are read in the pods: boto3's standard
# credentials (the S3 blob store), and the image's listening port (deploy/docker).
OTHER_ENV = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "PORT"}
# KEDA's ScaledObject is a custom resource, so the Kubernetes schemas lack it: the fields
# used here are checked against this excerpt of KEDA's CRD (keda.sh/v1alpha1).
SCALED_OBJECT = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "spec": {
            "type": "object",
            "required": ["scaleTargetRef", "triggers"],
            "additionalProperties": False,
            "properties": {
                "scaleTargetRef": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "name": {"type": "string"},
                    },
                },
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer", "minimum": 0},
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["type", "metadata"],
                        "additionalProperties": False,
                        "properties": {
                            "type": {"const": "prometheus"},
                            "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                            "metadata": {
                                "type": "object",
                                "required": ["serverAddress", "query", "threshold"],
                                "additionalProperties": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    },
}

# cert-manager's Certificate (the chart's poolTls.certManager) is a custom resource too:
# the fields used here, from cert-manager's CRD (cert-manager.io/v1).
CERTIFICATE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "cert-manager.io/v1"},
        "spec": {
            "type": "object",
            "required": ["secretName", "issuerRef"],
            "additionalProperties": False,
            "properties": {
                "secretName": {"type": "string"},
                "commonName": {"type": "string", "maxLength": 64},
                "dnsNames": {"type": "array", "items": {"type": "string"}},
                "usages": {
                    "type": "array",
                    "items": {
                        "enum": [
                            "digital signature",
                            "key encipherment",
                            "server auth",
                            "client auth",
                        ]
                    },
                },
                "duration": {"type": "string"},
                "renewBefore": {"type": "string"},
                "privateKey": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                        "size": {"type": "integer"},
                        "rotationPolicy": {"enum": ["Never", "Always"]},
                        "encoding": {"enum": ["PKCS1", "PKCS8"]},
                    },
                },
                "issuerRef": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {
                        "name": {"type": "string"},
                        "kind": {"type": "string"},
                        "group": {"type": "string"},
                    },
                },
            },
        },
    },
}
CUSTOM = {"ScaledObject": SCALED_OBJECT, "Certificate": CERTIFICATE}


def need(module: str) -> ModuleType:
    """A module of the ``deploy`` extra; skip (fail in CI) without it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        skip_or_fail(f"{module} is not installed (pip install modelport[deploy])")
        raise  # unreachable: skip_or_fail raises


def documents(texts: Iterable[str]) -> list[dict[str, Any]]:
    """The objects of rendered YAML streams, empty documents left out."""
    found: list[dict[str, Any]] = []
    for text in texts:
        found.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return found


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels only: the manifests use no expressions)
    selects pods with ``labels``."""
    assert not selector.get("matchExpressions"), "the checks read matchLabels only"
    wanted = selector.get("matchLabels", {} if "matchExpressions" in selector else selector)
    return all(labels.get(key) == value for key, value in wanted.items())


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def role_of(deployment: dict[str, Any]) -> Role:
    """The role a Deployment's pods serve: the image's argument."""
    return Role(deployment["spec"]["template"]["spec"]["containers"][0]["args"][0])


def deployment_of(objects: list[dict[str, Any]], role: Role) -> dict[str, Any]:
    found = [d for d in of_kind(objects, "Deployment") if role_of(d) is role]
    assert len(found) == 1, f"{len(found)} Deployments of the {role} role"
    return found[0]


# ---- the checks -----------------------------------------------------------------------


def check_schemas(objects: list[dict[str, Any]]) -> None:
    """Every object validates (strict: no unknown field) against the Kubernetes schemas
    of each version in ``KUBERNETES_VERSIONS``; ScaledObjects and Certificates against
    the excerpts of KEDA's and cert-manager's CRDs."""
    validate = need("kubernetes_validate")
    assert objects, "nothing rendered"
    for obj in objects:
        where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if obj.get("kind") in CUSTOM:
            jsonschema.validate(obj, CUSTOM[obj["kind"]])
            continue
        for version in KUBERNETES_VERSIONS:
            try:
                validate.validate(obj, version, strict=True)
            except validate.ValidationError as exc:
                path = ".".join(str(p) for p in exc.path)
                pytest.fail(f"{where} is invalid for Kubernetes {version}: {path}: {exc.message}")
            except validate.SchemaNotFoundError as exc:
                pytest.fail(f"{where}: {exc.message}")


class RoleApps:
    """The application of each role, as ``modelport serve --role`` builds it (on a
    temporary home), answering GETs: what a probe would get from a pod."""

    def __init__(self, home: Path) -> None:
        from starlette.testclient import TestClient

        from modelport.api import create_app
        from modelport.api.worker import create_worker_app
        from modelport.app import build_services, build_worker_services
        from tests.conftest import ADMIN_KEY

        self._services: list[Any] = []
        self._clients: dict[Role, TestClient] = {}
        self._answers: dict[tuple[Role, str], int] = {}
        for role in (Role.GATEWAY, Role.WORKER):
            settings = Settings(home=home / role.value, admin_key=ADMIN_KEY, role=role)
            if role is Role.WORKER:
                services: Any = build_worker_services(settings)
                app = create_worker_app(services)
            else:
                services = build_services(settings)
                app = create_app(services)
            self._services.append(services)
            self._clients[role] = TestClient(app).__enter__()

    def status(self, role: Role, path: str) -> int:
        """The status ``role``'s application answers an anonymous GET of ``path``."""
        if (role, path) not in self._answers:
            self._answers[role, path] = self._clients[role].get(path).status_code
        return self._answers[role, path]

    def close(self) -> None:
        for client in self._clients.values():
            client.__exit__(None, None, None)
        for services in self._services:
            services.close()


def check_probes(objects: list[dict[str, Any]], apps: RoleApps) -> None:
    """Each container's probes GET a path its role's application answers 200 (without
    credentials, as the kubelet asks), on one of its named ports; gateways and workers
    both have liveness and readiness."""
    for deployment in of_kind(objects, "Deployment"):
        role = role_of(deployment)
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            ports = {port["name"] for port in container["ports"]}
            assert "livenessProbe" in container and "readinessProbe" in container
            for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = container.get(kind)
                if probe is None:
                    continue
                get = probe["httpGet"]
                answer = apps.status(role, get["path"])
                assert answer == 200, (
                    f"{deployment['metadata']['name']} {kind} GETs {get['path']}: the "
                    f"{role} role's application answers {answer}"
                )
                assert get["port"] in ports, f"{kind} on {get['port']}, not a named port"


def setting_env_names() -> set[str]:
    """Every environment variable Settings reads: ``modelport.config``'s own list where
    it keeps one, else derived from the fields (aliases included), recursing into
    sections (a nested model) whose fields keep their flat ``MODELPORT_<FIELD>`` names
    (and the nested ``MODELPORT_<SECTION>__<FIELD>`` form too, to be safe)."""
    import modelport.config as config

    listed = getattr(config, "ENV_NAMES", None) or getattr(config, "env_names", None)
    if listed is not None:
        return set(listed() if callable(listed) else listed)
    prefix = str(Settings.model_config.get("env_prefix", "MODELPORT_")).upper()
    nested = str(Settings.model_config.get("env_nested_delimiter") or "__")

    def names(model: type[BaseModel], lead: str) -> Iterator[str]:
        for field_name, field in model.model_fields.items():
            yield f"{lead}{field_name}".upper()
            yield f"{prefix}{field_name}".upper()
            for alias in (field.alias, field.validation_alias):
                choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
                for choice in choices:
                    if isinstance(choice, str):
                        yield choice.upper()
                        yield f"{prefix}{choice}".upper()
                    elif isinstance(choice, AliasPath) and choice.path:
                        yield f"{prefix}{choice.path[0]}".upper()
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from names(kind, f"{lead}{field_name}{nested}")

    return set(names(Settings, prefix))


def env_of(objects: list[dict[str, Any]]) -> dict[str, str]:
    """Every variable the pods get: ConfigMaps, Secrets, and containers' own env."""
    env: dict[str, str] = {}
    for config in of_kind(objects, "ConfigMap"):
        env.update(config.get("data", {}))
    for secret in of_kind(objects, "Secret"):
        env.update({k: v for k, v in secret.get("stringData", {}).items() if "." not in k})
    for deployment in of_kind(objects, "Deployment") + of_kind(objects, "Job"):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            env.update({item["name"]: item.get("value", "") for item in container.get("env", [])})
    return env


def check_env(objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variable is a setting (or a known other one), and Settings accepts the
    values together."""
    env = env_of(objects)
    known = setting_env_names()
    unknown = sorted(name for name in env if name not in known and name not in OTHER_ENV)
    assert not unknown, f"not settings of modelport.config: {unknown}"
    for workload in of_kind(objects, "Deployment") + of_kind(objects, "Job"):
        for container in workload["spec"]["template"]["spec"]["containers"]:
            sources = [next(iter(s)) for s in container["envFrom"]]
            assert sources == ["configMapRef", "secretRef"], sources
    if not of_kind(objects, "Secret"):
        return  # made outside the rendering (overlays/production): its names are the docs'
    for name in ("MODELPORT_DATABASE_URL", "MODELPORT_REDIS_URL", "MODELPORT_BLOB_URL"):
        assert name in env, f"{name} is not given to the pods"
    for name, value in env.items():
        if name.startswith("MODELPORT_"):
            monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.grpc.port is not None and settings.store.auto_migrate is False
    assert not settings.store.is_embedded_database


def check_network_policies(objects: list[dict[str, Any]]) -> None:
    """Worker pods admit connections from gateway pods (HTTP and the pool's gRPC port),
    and from no other pod but the metrics scraper (a pod of the named monitoring
    namespace, on the HTTP port)."""
    gateway = pod_labels(deployment_of(objects, Role.GATEWAY))
    worker = pod_labels(deployment_of(objects, Role.WORKER))
    policies = [
        p for p in of_kind(objects, "NetworkPolicy") if selects(p["spec"]["podSelector"], worker)
    ]
    assert policies, "no NetworkPolicy selects the worker pods: every pod may reach them"
    from_gateways = False
    for policy in policies:
        assert "Ingress" in policy["spec"]["policyTypes"]
        for rule in policy["spec"].get("ingress", []):
            peers = rule.get("from")
            assert peers, f"{policy['metadata']['name']}: a rule admitting every source"
            ports = [p["port"] for p in rule.get("ports", [])]
            for peer in peers:
                assert "ipBlock" not in peer, "workers admit no address range"
                if "namespaceSelector" in peer:
                    # The scraper: one named namespace, and a pod selector within it.
                    spaces = peer["namespaceSelector"].get("matchLabels", {})
                    assert set(spaces) == {"kubernetes.io/metadata.name"}, spaces
                    assert peer.get("podSelector", {}).get("matchLabels"), "any pod there"
                    assert not selects(peer["podSelector"], gateway)
                    assert ports == ["http"], f"the scraper reaches {ports}"
                    continue
                assert selects(peer["podSelector"], gateway), f"admits {peer}"
                assert not selects(peer["podSelector"], worker), "workers reach workers"
                from_gateways = True
                assert ports and set(ports) <= {"http", "pool"}, f"gateways reach {ports}"
    assert from_gateways, "no rule admits the gateways"


def check_services(objects: list[dict[str, Any]]) -> None:
    """Each Service selects one Deployment's pods, on ports they name; the gateways'
    gRPC port is the one MODELPORT_GRPC_PORT opens; workers expose no public gRPC (their
    pool port, MODELPORT_GRPC_PORT too, is reached at the pods' own addresses)."""
    env = env_of(objects)
    for service in of_kind(objects, "Service"):
        chosen = [
            d
            for d in of_kind(objects, "Deployment")
            if selects(service["spec"]["selector"], pod_labels(d))
        ]
        assert len(chosen) == 1, f"Service {service['metadata']['name']} selects {len(chosen)}"
        container = chosen[0]["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, f"{service['metadata']['name']}: {port}"
        if role_of(chosen[0]) is Role.GATEWAY:
            assert ports["grpc"] == int(env["MODELPORT_GRPC_PORT"])
        else:
            assert "grpc" not in ports
            assert ports["pool"] == int(env["MODELPORT_GRPC_PORT"])
            assert "pool" not in {p["targetPort"] for p in service["spec"]["ports"]}
    for budget in of_kind(objects, "PodDisruptionBudget"):
        assert any(
            selects(budget["spec"]["selector"], pod_labels(d))
            for d in of_kind(objects, "Deployment")
        ), budget["metadata"]["name"]


def exported_metrics() -> set[str]:
    """Sample names the platform's /metrics pages carry (HTTP and runtime collectors,
    and a gateway's worker pool)."""
    from prometheus_client import CollectorRegistry

    from modelport.observability.http_metrics import HttpMetrics
    from modelport.observability.metrics import RuntimeMetrics
    from modelport.serving.pool.metrics import PoolCollector
    from modelport.serving.pool.scaler import CallCounter
    from modelport.serving.pool.types import WorkerInfo
    from modelport.serving.pool.view import PoolView

    class NoWorkers:
        def announce(self, info: WorkerInfo, lease_seconds: float) -> None: ...

        def withdraw(self, worker_id: str) -> None: ...

        def live(self) -> list[WorkerInfo]:
            return []

    pool = CollectorRegistry()
    pool.register(PoolCollector(PoolView(NoWorkers()), CallCounter()))
    names: set[str] = set()
    for registry in (HttpMetrics().registry, RuntimeMetrics().registry, pool):
        for family in registry.collect():
            names.add(family.name)
            for suffix in ("_total", "_sum", "_count", "_bucket"):
                names.add(family.name + suffix)
    return names


# The pods and external metrics prometheus-adapter serves (docs/deploy.md has its
# rules), each from a series of the platform's /metrics.
ADAPTER_METRICS = {
    "modelport_http_requests_per_second": "modelport_http_requests_total",
    "modelport_pool_queue_wait_seconds": "modelport_pool_queue_wait_seconds",
}


def check_autoscalers(objects: list[dict[str, Any]]) -> None:
    """One autoscaler per role's Deployment at most, aimed at a rendered Deployment, on
    series the platform exports (the PromQL of KEDA's triggers, the adapter's sources)."""
    exported = exported_metrics()
    deployments = {d["metadata"]["name"]: d for d in of_kind(objects, "Deployment")}
    targets: list[str] = []
    for hpa in of_kind(objects, "HorizontalPodAutoscaler"):
        targets.append(hpa["spec"]["scaleTargetRef"]["name"])
        for metric in hpa["spec"]["metrics"]:
            if metric["type"] in ("Pods", "External"):
                name = metric[metric["type"].lower()]["metric"]["name"]
                assert ADAPTER_METRICS[name] in exported, name
    for scaled in of_kind(objects, "ScaledObject"):
        targets.append(scaled["spec"]["scaleTargetRef"]["name"])
        for trigger in scaled["spec"]["triggers"]:
            series = re.findall(r"\b(modelport_[a-z_]+)", trigger["metadata"]["query"])
            assert series, trigger
            missing = sorted(set(series) - exported)
            assert not missing, f"the query reads series no /metrics has: {missing}"
            float(trigger["metadata"]["threshold"])
    assert all(target in deployments for target in targets), targets
    assert len(targets) == len(set(targets)), f"two autoscalers on one Deployment: {targets}"


def check_hardening(objects: list[dict[str, Any]]) -> None:
    """Pods run as the image's non-root user on a read-only root, with requests and
    limits, and no service account token."""
    for workload in of_kind(objects, "Deployment") + of_kind(objects, "Job"):
        spec = workload["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["automountServiceAccountToken"] is False
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"][kind]), kind
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/var/lib/modelport", "/tmp"} <= mounts, "a read-only root needs both"
    jobs = of_kind(objects, "Job")
    assert [j["spec"]["template"]["spec"]["containers"][0]["args"] for j in jobs] == [["migrate"]]


def check_pool(objects: list[dict[str, Any]]) -> None:
    """Workers join the pool: their gRPC server listens on every address and each
    announces its pod's own, and the worker token is given where the Secrets render."""
    pod = deployment_of(objects, Role.WORKER)["spec"]["template"]["spec"]
    env = {item["name"]: item for item in pod["containers"][0].get("env", [])}
    assert env["MODELPORT_GRPC_HOST"]["value"] == "0.0.0.0"
    advertise = env["MODELPORT_WORKER_ADVERTISE_HOST"]["valueFrom"]["fieldRef"]
    assert advertise["fieldPath"] == "status.podIP"
    if of_kind(objects, "Secret"):
        assert env_of(objects).get("MODELPORT_WORKER_TOKEN"), "the pool is off: no token"


POOL_TLS = ("MODELPORT_WORKER_TLS_CERT", "MODELPORT_WORKER_TLS_KEY", "MODELPORT_WORKER_TLS_CA")


def pool_tls(objects: list[dict[str, Any]]) -> dict[Role, dict[str, str]]:
    """Each role's MODELPORT_WORKER_TLS_* variables (its container's own env), checked:
    every file lies on a read-only mount of a Secret volume of its pod (holding that key
    where the Secret is rendered, or its items name it); both roles have TLS or neither;
    a worker that wants client certificates (its CA) gets them from gateways that
    present one, and gateways with the authority talk to workers that serve TLS."""
    secrets = {s["metadata"]["name"]: s for s in of_kind(objects, "Secret")}
    found: dict[Role, dict[str, str]] = {}
    for role in (Role.GATEWAY, Role.WORKER):
        pod = deployment_of(objects, role)["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        container = pod["containers"][0]
        mounts = container["volumeMounts"]
        assert all(m["name"] in volumes for m in mounts), f"{role}: a mount with no volume"
        env = {
            item["name"]: item.get("value", "")
            for item in container.get("env", [])
            if item["name"].startswith("MODELPORT_WORKER_TLS_")
        }
        for name in POOL_TLS:
            if name not in env:
                continue
            path = Path(env[name])
            (mount,) = [m for m in mounts if Path(m["mountPath"]) == path.parent]
            assert mount.get("readOnly") is True, f"{role}: {mount['mountPath']} is writable"
            volume = volumes[mount["name"]]
            assert "secret" in volume, f"{role}: {name} is not on a Secret volume"
            source = volume["secret"]
            if "items" in source:
                assert path.name in {i["path"] for i in source["items"]}, (role, name)
            elif source["secretName"] in secrets:
                held = secrets[source["secretName"]]
                keys = set(held.get("stringData", {})) | set(held.get("data", {}))
                assert path.name in keys, f"{role}: {source['secretName']} lacks {path.name}"
        assert ("MODELPORT_WORKER_TLS_CERT" in env) == ("MODELPORT_WORKER_TLS_KEY" in env)
        found[role] = env
    gateway, worker = found[Role.GATEWAY], found[Role.WORKER]
    if not gateway and not worker:
        return found
    assert "MODELPORT_WORKER_TLS_CA" in gateway, "gateways would not speak TLS to workers"
    assert "MODELPORT_WORKER_TLS_CERT" in worker, "workers would not serve TLS"
    if "MODELPORT_WORKER_TLS_CA" in worker:
        assert "MODELPORT_WORKER_TLS_CERT" in gateway, "workers want a client certificate"
    # Pods' addresses change: one name on every worker's certificate.
    assert gateway.get("MODELPORT_WORKER_TLS_SERVER_NAME"), "no server name to check"
    return found


def check_pool_tls(objects: list[dict[str, Any]]) -> None:
    pool_tls(objects)


def check_all(
    objects: list[dict[str, Any]], apps: RoleApps, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_schemas(objects)
    check_probes(objects, apps)
    check_env(objects, monkeypatch)
    check_network_policies(objects)
    check_services(objects)
    check_autoscalers(objects)
    check_hardening(objects)
    check_pool(objects)
    check_pool_tls(objects)
