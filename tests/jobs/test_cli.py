"""``modelport jobs`` against a live server whose own runner (started by the API's
lifespan) runs the jobs: submit, watch until done, show, list, cancel."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from modelport.cli import modelport
from tests.conftest import LiveServer
from tests.jobs.conftest import INPUTS
from tests.metering.conftest import Platform, make_platform


@pytest.fixture
def served(tmp_path: Path, database_url: str) -> Iterator[tuple[Platform, LiveServer]]:
    platform = make_platform(
        tmp_path / "home", database_url, job_runner_concurrency=2, job_poll_seconds=0.1
    )
    server = platform.live()
    yield platform, server
    server.stop()
    platform.services.close()


def cli(served: tuple[Platform, LiveServer], *args: str) -> Result:
    platform, server = served
    return CliRunner().invoke(modelport, ["--url", server.url, "--api-key", platform.key, *args])


def as_json(served: tuple[Platform, LiveServer], *args: str) -> Any:
    result = cli(served, "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_submit_watch_show_list_and_cancel(
    served: tuple[Platform, LiveServer], tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"inputs": INPUTS}))
    job = as_json(served, "jobs", "submit", "acme/adder", str(inputs), "--rename", "y=z")
    assert job["state"] in ("queued", "running", "succeeded")
    watched = cli(served, "jobs", "watch", job["id"], "--interval", "0.05", "--timeout", "60")
    assert watched.exit_code == 0, watched.output
    assert "succeeded" in watched.output and "[2.0, 3.0, 4.0, 5.0]" in watched.output
    shown = as_json(served, "jobs", "show", job["id"])
    assert shown["state"] == "succeeded" and shown["outputs"][0]["name"] == "z"
    listed = as_json(served, "jobs", "list", "--state", "succeeded")
    assert [j["id"] for j in listed["items"]] == [job["id"]]
    table = cli(served, "jobs", "list")
    assert table.exit_code == 0 and "succeeded" in table.output and "3/3" in table.output
    refused = cli(served, "jobs", "cancel", job["id"])
    assert refused.exit_code == 1 and "job_finished" in refused.output


def test_inline_inputs_that_are_not_inputs_are_refused_before_any_request(
    served: tuple[Platform, LiveServer],
) -> None:
    for text in ('"x"', "[1, 2]", "{not json"):
        result = cli(served, "jobs", "submit", "acme/adder", text)
        assert result.exit_code == 2, result.output
        assert "INPUTS" in result.output
    listed = as_json(served, "jobs", "list")
    assert listed["items"] == []


def test_submit_takes_the_inputs_infer_takes_and_json_after_the_verb(
    served: tuple[Platform, LiveServer],
) -> None:
    """``infer``'s shorthand by input name (the datatype from the model's metadata), and
    ``--json`` where the verb's own options are."""
    job = cli(served, "jobs", "submit", "acme/adder", '{"x": [[1, 2, 3, 4]]}', "--json")
    assert job.exit_code == 0, job.output
    submitted = json.loads(job.output)
    watched = cli(served, "jobs", "watch", submitted["id"], "--interval", "0.05", "--timeout", "60")
    assert watched.exit_code == 0, watched.output
    assert "[2.0, 3.0, 4.0, 5.0]" in watched.output
    shown = cli(served, "jobs", "show", submitted["id"], "--json")
    assert json.loads(shown.output)["state"] == "succeeded"


def test_watch_a_batch_counts_its_rows(served: tuple[Platform, LiveServer], tmp_path: Path) -> None:
    platform, _ = served
    out = io.BytesIO()
    np.save(out, np.ones((30, 4), dtype=np.float32))
    file = platform.services.files.create("beta", "user_data", "rows.npy", out.getvalue())
    pipeline = [
        {"name": "shards", "implementation": "tensor_shards", "params": {"shard_rows": 10}},
        {"name": "publish", "implementation": "tensor_publish"},
    ]
    response = platform.client.post(
        "/api/jobs",
        json={"target": {"model": "acme/adder"}, "input_digest": file.digest, "pipeline": pipeline},
        headers={"Authorization": f"Bearer {platform.key}"},
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    watched = cli(served, "jobs", "watch", job_id, "--interval", "0.05", "--timeout", "60")
    assert watched.exit_code == 0, watched.output
    assert "succeeded" in watched.output and "rows: 30/30 done, 0 failed" in watched.output
    assert watched.output.count("shard ") == 3
