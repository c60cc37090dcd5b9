"""Where publishers' tensor models execute by default, and what the platform says about
it at start-up (the suite itself pins thread execution: ``tests/conftest.py``)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from modelport.app import report_execution
from modelport.config import Settings
from modelport.sandbox import Sandbox, SandboxMode

EXECUTION_ENV = "MODELPORT_RUNTIME_EXECUTION"


def _events(caplog: pytest.LogCaptureFixture) -> dict[str, logging.LogRecord]:
    return {getattr(r, "event", ""): r for r in caplog.records if r.name == "modelport.runtime"}


def test_the_default_settings_run_every_tensor_version_in_a_model_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(EXECUTION_ENV, raising=False)
    assert Settings(home=tmp_path).runtime.execution == "process"
    monkeypatch.setenv(EXECUTION_ENV, "manifest")  # the operator's way back to threads
    assert Settings(home=tmp_path).runtime.execution == "manifest"


def test_threads_chosen_by_the_operator_are_a_warning_naming_the_setting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(home=tmp_path, runtime_execution="manifest")
    with caplog.at_level(logging.INFO, logger="modelport.runtime"):
        report_execution(settings, Sandbox(SandboxMode.UNISOLATED))
    record = _events(caplog)["runtime.execution_in_server"]
    assert record.levelno == logging.WARNING
    assert "MODELPORT_RUNTIME_EXECUTION=manifest" in record.getMessage()


def test_model_hosts_the_sandbox_cannot_start_are_said_loudly_with_the_way_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(home=tmp_path, runtime_execution="process", sandbox="bubblewrap")
    missing = Sandbox(SandboxMode.BUBBLEWRAP, bwrap=str(tmp_path / "no-bwrap"))
    with caplog.at_level(logging.INFO, logger="modelport.runtime"):
        report_execution(settings, missing)
    record = _events(caplog)["runtime.model_hosts_unavailable"]
    assert record.levelno == logging.ERROR
    message = record.getMessage()
    assert "MODELPORT_RUNTIME_EXECUTION=process" in message
    assert "MODELPORT_SANDBOX=bubblewrap" in message
    assert "sandbox_unavailable" in message and "nothing is run in the server" in message


def test_model_hosts_that_can_start_are_reported_with_their_isolation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(home=tmp_path, runtime_execution="process", sandbox="unisolated")
    with caplog.at_level(logging.INFO, logger="modelport.runtime"):
        report_execution(settings, Sandbox(SandboxMode.UNISOLATED))
    events = _events(caplog)
    assert list(events) == ["runtime.model_hosts"]
    record = events["runtime.model_hosts"]
    assert record.levelno == logging.INFO
    assert "isolation=none" in record.getMessage()
