"""A validation the server answers as a job (202: it waits for none here) is followed to
its end by ``modelport versions transition`` and by the client."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from modelport.app import Services
from modelport.cli import modelport
from modelport.client import Client
from modelport.client.errors import InvalidRequest
from modelport.config import Settings
from tests.conftest import ADMIN_KEY, LiveServer
from tests.registry.helpers import find_blob_file, manifest_for, onnx_bytes, put_blob


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "validation_wait_seconds": 0,  # every validation answers 202 with its job
            "job_poll_seconds": 0.05,
        }
    )


@pytest.fixture
def server(live_server: LiveServer, services: Services) -> LiveServer:
    data = onnx_bytes()
    put_blob(services.blob_store, data)
    services.registry.create_model("acme", "adder", actor="t", license="MIT")
    for version in ("1", "2", "3"):
        manifest = manifest_for(data, fmt="tflite", path="m.tflite", description=version)
        services.registry.publish("acme", "adder", version, manifest, actor="t")
    return live_server


def test_the_cli_follows_the_validation_job(server: LiveServer, services: Services) -> None:
    base = ["--url", server.url, "--api-key", ADMIN_KEY]
    result = CliRunner().invoke(
        modelport,
        [*base, "versions", "transition", "acme/adder:1", "--to", "validated"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "validating as job" in result.output
    assert "candidate -> validated" in result.output
    assert services.registry.get_version("acme", "adder", "1").state.value == "validated"
    job_id = result.output.split("validating as job ")[1].split()[0]
    shown = CliRunner().invoke(modelport, [*base, "jobs", "show", job_id])
    assert shown.exit_code == 0, shown.output
    assert "succeeded (version acme/adder:1)" in shown.output
    assert "version: validated" in shown.output
    assert "report: /api/models/acme/adder/versions/1/validation" in shown.output


def test_the_client_follows_the_validation_job(server: LiveServer, services: Services) -> None:
    with Client(server.url, ADMIN_KEY) as client:
        moved = client.versions.transition("acme/adder:2", "validated", "ci")
        assert not moved.pending and moved.state == "validated" and moved.reason == "ci"
        assert moved.job is not None
        assert client.jobs.get(moved.job).state == "succeeded"

        # A failed validation raises as it did when answered in the request.
        manifest = services.registry.get_version("acme", "adder", "3").manifest
        find_blob_file(services.settings.store.home, manifest.files[0].digest).write_bytes(b"x")
        with pytest.raises(InvalidRequest) as failed:
            client.versions.transition("acme/adder:3", "validated")
        assert failed.value.code == "validation_failed"
        assert failed.value.body["report"]["cause"] == "file_check_failed"
        assert client.jobs.get(failed.value.body["job"]).state == "failed"
