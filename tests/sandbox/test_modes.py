"""The sandbox fails closed: where bubblewrap cannot isolate, nothing runs unless the
operator chose ``unisolated``; validation reports the isolation it ran under, and
``/metrics`` counts it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from modelport.app import build_blob_store, build_cgroups, build_sandbox
from modelport.config import Settings
from modelport.manifest import parse_manifest
from modelport.observability.metrics import RuntimeMetrics
from modelport.registry.validation import SubprocessValidator
from modelport.sandbox import Isolation, Sandbox, SandboxMode, SandboxUnavailable
from tests.registry.helpers import manifest_for, onnx_bytes, put_blob
from tests.sandbox.conftest import make_runner

MISSING = "/nonexistent/bwrap"


def _limits() -> str:
    """What caps children on this host (cgroups where the server can make them)."""
    return build_cgroups("auto", None).enforcement.value


def test_without_bubblewrap_auto_and_bubblewrap_refuse(tmp_path: Path) -> None:
    for mode in (SandboxMode.AUTO, SandboxMode.BUBBLEWRAP):
        with pytest.raises(SandboxUnavailable) as refused:
            Sandbox(mode, bwrap=MISSING).confinement()
        assert refused.value.code == "sandbox_unavailable"
        assert "MODELPORT_SANDBOX=unisolated" in refused.value.message


def _validate(settings: Settings, metrics: RuntimeMetrics | None = None) -> dict[str, object]:
    store = build_blob_store(settings)
    data = onnx_bytes()
    put_blob(store, data)
    validator = SubprocessValidator(
        store,
        work_dir=settings.store.home / "validation",
        timeout_seconds=60,
        memory_bytes=2 << 30,
        sandbox=build_sandbox(settings, metrics),
    )
    return validator.validate(parse_manifest(manifest_for(data)))


def test_validation_where_the_machine_cannot_isolate_runs_nothing(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", sandbox="auto", sandbox_bwrap=MISSING)
    report = _validate(settings)
    assert report["passed"] is False
    assert report["cause"] == "sandbox_unavailable"
    assert report["executed"] is False
    assert "bubblewrap" in str(report["detail"])


@pytest.mark.slow
def test_unisolated_is_the_operators_explicit_choice(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", sandbox="unisolated", sandbox_bwrap=MISSING)
    report = _validate(settings)
    assert report["passed"] is True, report
    assert report["sandbox"] == {
        "isolation": "none",
        "seccomp": True,
        "network": "host",
        "environment": "empty",
        "limits": _limits(),
        "filesystem": "host",
    }


@pytest.mark.slow
def test_unisolated_children_still_get_an_empty_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODELPORT_ADMIN_KEY", "admin-" + "s" * 30)
    run = make_runner(Sandbox(SandboxMode.UNISOLATED), tmp_path)
    probe = run("import json, os\nprint(json.dumps(sorted(os.environ)))\n")
    assert probe.finished.confinement.isolation is Isolation.NONE
    assert "MODELPORT_ADMIN_KEY" not in probe.output


@pytest.mark.slow
def test_validation_reports_and_counts_the_isolation_it_ran_under(
    bubblewrap: None, tmp_path: Path
) -> None:
    metrics = RuntimeMetrics()
    report = _validate(Settings(home=tmp_path / "home", sandbox="auto"), metrics)
    assert report["passed"] is True, report
    assert report["sandbox"] == {
        "isolation": "bubblewrap",
        "seccomp": True,
        "network": "none",
        "environment": "empty",
        "limits": _limits(),
        "filesystem": "read-only view, private scratch",
    }
    sample = metrics.registry.get_sample_value
    labels = {"isolation": "bubblewrap", "seccomp": "true", "outcome": "exited"}
    assert sample("modelport_sandbox_runs_total", labels) == 1
    assert sample("modelport_sandbox_mode", {"mode": "auto"}) == 1
    assert sample("modelport_sandbox_limits", {"mechanism": _limits()}) == 1


def test_unisolated_says_at_start_up_what_it_does_not_protect(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="modelport.sandbox")
    build_sandbox(Settings(home=tmp_path / "home", sandbox="unisolated"))
    [record] = [r for r in caplog.records if getattr(r, "event", None) == "sandbox.unisolated"]
    assert record.levelno == logging.WARNING
    unprotected = record.fields["unprotected"]  # type: ignore[attr-defined]
    for words in ("file system", "/proc", "Unix sockets"):
        assert words in unprotected
