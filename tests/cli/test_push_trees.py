"""XGBoost and LightGBM models pushed as their libraries saved them (no manifest written
by hand), validated by the platform, and called through ``tritonclient``: the answers
are the original model's predictions."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from click.testing import CliRunner, Result

from modelport.app import Services
from modelport.cli import modelport
from tests.conftest import ADMIN_KEY, LiveServer
from tests.runtime.formats.trees.models import Saved, save_all

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")

AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture(autouse=True)
def _cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Saved]:
    return save_all(tmp_path_factory.mktemp("trees"))


def cli(server: LiveServer, *args: str) -> Result:
    base = ["--url", server.url, "--api-key", ADMIN_KEY]
    return CliRunner().invoke(modelport, [*base, *args], catch_exceptions=False)


def push_validate_and_call(
    server: LiveServer, model: Saved, tmp_path: Path, ref: str, manifest: dict[str, object] | None
) -> dict[str, np.ndarray]:
    """Push the saved file alone (plus ``manifest``), validate it, and call it on rows
    the example did not hold; the answers by output name."""
    folder = tmp_path / ref.replace("/", "-")
    folder.mkdir()
    (folder / model.path.name).write_bytes(model.path.read_bytes())
    if manifest is not None:
        (folder / "manifest.json").write_text(json.dumps(manifest))
    example = tmp_path / f"{folder.name}-example.json"
    example.write_text(json.dumps({"input": model.rows[:3].tolist()}))
    pushed = cli(
        server, "push", str(folder), "--model", ref, "--version", "1",
        "--license", "MIT", "--example-input", str(example), "--json",
    )  # fmt: skip
    assert pushed.exit_code == 0, pushed.output
    published = json.loads(pushed.output)["manifest"]
    assert published["format"] == model.fmt
    [computed] = published["examples"]
    first = model.predict(model.rows[:3])
    for output in computed["outputs"]:
        np.testing.assert_allclose(
            np.array(output["data"]), first[output["name"]].ravel(), rtol=1e-4, atol=1e-4
        )

    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as http:
        validated = http.post(f"/api/models/{ref}/versions/1/transitions", json={"to": "validated"})
        assert validated.status_code == 201, validated.text
        report = http.get(f"/api/models/{ref}/versions/1/validation").json()
        assert report["passed"] is True, report

    client = triton.InferenceServerClient(url=server.url.removeprefix("http://"))
    try:
        rows = model.rows[5::11]
        tensor = triton.InferInput("input", list(rows.shape), "FP32")
        tensor.set_data_from_numpy(rows, binary_data=True)
        result = client.infer(ref, [tensor], model_version="1", headers=dict(AUTH))
        names = [output["name"] for output in published["outputs"]]
        answers = {name: result.as_numpy(name) for name in names}
    finally:
        client.close()
    want = model.predict(rows)
    for name, got in answers.items():
        assert got is not None and got.dtype == want[name].dtype, name
        np.testing.assert_allclose(got, want[name], rtol=1e-4, atol=1e-4)
    return answers


def test_tree_models_pushed_as_saved_answer_with_the_originals_predictions(
    live_server: LiveServer, services: Services, saved: dict[str, Saved], tmp_path: Path
) -> None:
    services.tenancy.create_tenant("acme", actor="admin")
    for kind, ref in (("xgboost-multiclass-json", "acme/xgb"), ("lightgbm-regression", "acme/lgb")):
        push_validate_and_call(live_server, saved[kind], tmp_path, ref, None)


@pytest.mark.slow
def test_a_tree_model_runs_in_a_sandboxed_model_host(
    live_server: LiveServer, services: Services, saved: dict[str, Saved], tmp_path: Path
) -> None:
    """The default execution for a tenant's files: the libraries parse them in a model
    host of their own, under the sandbox's system-call allow-list."""
    services.tenancy.create_tenant("acme", actor="admin")
    process = {"license": "MIT", "runtime": {"execution": "process"}}
    for kind, ref in (("xgboost-binary", "acme/xgb"), ("lightgbm-multiclass", "acme/lgb")):
        push_validate_and_call(live_server, saved[kind], tmp_path, ref, process)
