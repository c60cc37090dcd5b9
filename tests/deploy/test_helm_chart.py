"""The Helm chart (deploy/helm/modelport) renders with Helm's own template engine (the
Go library helm-python-sdk bundles: no cluster, no helm binary), and each rendering
passes every check of tests/deploy/manifests.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from modelport.config import Role
from tests.deploy import manifests
from tests.deploy.manifests import DEPLOY, documents, of_kind

CHART = DEPLOY / "helm" / "modelport"


@pytest.fixture(scope="module")
def helm() -> Any:
    return manifests.need("helm_python")


@pytest.fixture(scope="module")
def chart(helm: Any) -> Iterator[Any]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: Any, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    rendered = chart.render(values, name="modelport", namespace="modelport", is_install=True)
    return documents(rendered.values())


def test_the_chart_lints_clean(helm: Any) -> None:
    report = helm.lint(CHART, strict=True, kube_version="v1.29.0")
    errors = [m for m in report["messages"] if m["severity"] >= 2]
    assert not errors and not report["errors"], report


@pytest.mark.parametrize(
    "values",
    [
        None,
        {"worker": {"autoscaling": {"mode": "hpa"}}},
        {
            "worker": {"autoscaling": {"mode": "none"}},
            "gateway": {"autoscaling": {"enabled": False}},
        },
        {"secrets": {"create": False, "existingSecret": "mine", "signingKeySecret": "my-key"}},
        {"poolTls": {"enabled": True}},
        {"poolTls": {"enabled": True, "mutual": False, "certManager": {"enabled": True}}},
    ],
    ids=["default", "worker-hpa", "fixed", "own-secrets", "pool-mtls", "pool-tls-cert-manager"],
)
def test_each_rendering_passes_every_check(
    chart: Any,
    values: dict[str, Any] | None,
    apps: manifests.RoleApps,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manifests.check_all(render(chart, values), apps, monkeypatch)


def test_the_worker_autoscaler_follows_its_mode(chart: Any) -> None:
    keda = render(chart)
    assert [o["metadata"]["name"] for o in of_kind(keda, "ScaledObject")] == ["modelport-worker"]
    assert "replicas" not in manifests.deployment_of(keda, Role.WORKER)["spec"]
    hpa = render(chart, {"worker": {"autoscaling": {"mode": "hpa"}}})
    assert not of_kind(hpa, "ScaledObject")
    names = sorted(o["metadata"]["name"] for o in of_kind(hpa, "HorizontalPodAutoscaler"))
    assert names == ["modelport-gateway", "modelport-worker"]
    fixed = render(chart, {"worker": {"autoscaling": {"mode": "none"}, "replicas": 3}})
    assert manifests.deployment_of(fixed, Role.WORKER)["spec"]["replicas"] == 3
    assert not of_kind(fixed, "ScaledObject")


def test_an_unknown_autoscaler_mode_is_refused(chart: Any, helm: Any) -> None:
    with pytest.raises(helm.HelmError, match="keda, hpa or none"):
        chart.render({"worker": {"autoscaling": {"mode": "sometimes"}}}, name="modelport")


def test_own_secrets_are_referenced_not_rendered(chart: Any) -> None:
    objects = render(
        chart, {"secrets": {"create": False, "existingSecret": "mine", "signingKeySecret": "k"}}
    )
    assert not of_kind(objects, "Secret")
    for role in (Role.GATEWAY, Role.WORKER):
        pod = manifests.deployment_of(objects, role)["spec"]["template"]["spec"]
        assert pod["containers"][0]["envFrom"][1] == {"secretRef": {"name": "mine"}}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["signing-key"]["secret"]["secretName"] == "k"


def test_without_network_policies_none_render(chart: Any) -> None:
    """The switch exists for clusters without a policy controller; the checks then
    find workers open, as they are."""
    objects = render(chart, {"networkPolicy": {"enabled": False}})
    assert not of_kind(objects, "NetworkPolicy")
    with pytest.raises(AssertionError, match="no NetworkPolicy selects the worker pods"):
        manifests.check_network_policies(objects)


def test_a_probe_on_a_path_the_role_does_not_serve_fails_the_check(
    chart: Any, apps: manifests.RoleApps
) -> None:
    objects = render(chart)
    worker = manifests.deployment_of(objects, Role.WORKER)["spec"]["template"]["spec"]
    worker["containers"][0]["readinessProbe"]["httpGet"]["path"] = "/readyz"  # gateway's only
    with pytest.raises(AssertionError, match="/readyz: the worker role's application answers"):
        manifests.check_probes(objects, apps)


def test_an_env_name_that_is_no_setting_fails_the_check(
    chart: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = render(chart)
    manifests.named(objects, "ConfigMap", "modelport-config")["data"]["MODELPORT_DATABSE_URL"] = ""
    with pytest.raises(AssertionError, match="MODELPORT_DATABSE_URL"):
        manifests.check_env(objects, monkeypatch)


@pytest.mark.parametrize(
    ("peer", "message"),
    [
        ({"podSelector": {}}, "workers reach workers"),
        ({"podSelector": {"matchLabels": {"app": "other"}}}, "admits"),
        ({"ipBlock": {"cidr": "0.0.0.0/0"}}, "no address range"),
    ],
    ids=["every-pod", "another-app", "addresses"],
)
def test_a_worker_open_to_others_fails_the_check(
    chart: Any, peer: dict[str, Any], message: str
) -> None:
    objects = render(chart)
    policy = manifests.named(objects, "NetworkPolicy", "modelport-worker")
    policy["spec"]["ingress"].append({"from": [peer], "ports": [{"port": "http"}]})
    with pytest.raises(AssertionError, match=message):
        manifests.check_network_policies(objects)


def test_an_invalid_field_fails_the_schema_check(chart: Any) -> None:
    objects = render(chart)
    manifests.named(objects, "Service", "modelport-worker")["spec"]["prots"] = []
    with pytest.raises(pytest.fail.Exception, match="Service/modelport-worker is invalid"):
        manifests.check_schemas(objects)


def test_pool_tls_mounts_each_roles_secret_and_is_mutual_by_default(chart: Any) -> None:
    assert manifests.pool_tls(render(chart)) == {Role.GATEWAY: {}, Role.WORKER: {}}
    objects = render(chart, {"poolTls": {"enabled": True, "workerSecret": "workers-tls"}})
    tls = manifests.pool_tls(objects)
    for role in (Role.GATEWAY, Role.WORKER):
        assert set(manifests.POOL_TLS) <= set(tls[role]), role
    assert tls[Role.GATEWAY]["MODELPORT_WORKER_TLS_SERVER_NAME"] == "modelport-worker"
    secrets = {
        role: {
            v["name"]: v
            for v in manifests.deployment_of(objects, role)["spec"]["template"]["spec"]["volumes"]
        }["pool-tls"]["secret"]["secretName"]
        for role in (Role.GATEWAY, Role.WORKER)
    }
    assert secrets == {Role.GATEWAY: "modelport-pool-tls-gateway", Role.WORKER: "workers-tls"}
    assert not of_kind(objects, "Certificate")


def test_one_way_tls_leaves_the_client_certificate_out(chart: Any) -> None:
    tls = manifests.pool_tls(render(chart, {"poolTls": {"enabled": True, "mutual": False}}))
    assert set(tls[Role.GATEWAY]) == {"MODELPORT_WORKER_TLS_CA", "MODELPORT_WORKER_TLS_SERVER_NAME"}
    assert set(tls[Role.WORKER]) == {"MODELPORT_WORKER_TLS_CERT", "MODELPORT_WORKER_TLS_KEY"}


def test_cert_manager_writes_the_secrets_the_pods_mount(chart: Any) -> None:
    values = {"poolTls": {"enabled": True, "certManager": {"enabled": True}}}
    objects = render(chart, values)
    certificates = {c["spec"]["secretName"]: c["spec"] for c in of_kind(objects, "Certificate")}
    assert set(certificates) == {"modelport-pool-tls-gateway", "modelport-pool-tls-worker"}
    # The worker's certificate names what gateways check; the gateway's is a client's.
    assert certificates["modelport-pool-tls-worker"]["dnsNames"] == ["modelport-worker"]
    assert "server auth" in certificates["modelport-pool-tls-worker"]["usages"]
    assert "client auth" in certificates["modelport-pool-tls-gateway"]["usages"]


def test_a_tls_file_on_a_writable_mount_fails_the_check(chart: Any) -> None:
    objects = render(chart, {"poolTls": {"enabled": True}})
    worker = manifests.deployment_of(objects, Role.WORKER)["spec"]["template"]["spec"]
    for mount in worker["containers"][0]["volumeMounts"]:
        if mount["name"] == "pool-tls":
            mount["readOnly"] = False
    with pytest.raises(AssertionError, match="pool-tls is writable"):
        manifests.check_pool_tls(objects)
