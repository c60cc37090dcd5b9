"""``modelport datasets push`` uploads split files over real HTTP with the models'
resumable transfer and publishes the version (the uploading tenant holds its blobs);
``datasets list`` and ``datasets search`` show it to another tenant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from modelport.cli import modelport
from tests.conftest import LiveServer
from tests.evaluations.conftest import (
    CLASSIFICATION_COLUMNS,
    CLASSIFIER_IO,
    Trained,
    World,
    parquet_bytes,
)


@pytest.fixture(autouse=True)
def _cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resumable-upload state file goes to a temporary cache folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _cli(server: LiveServer, key: str, *args: str) -> Result:
    base = ["--url", server.url, "--api-key", key]
    return CliRunner().invoke(modelport, [*base, *args], catch_exceptions=False)


def test_a_dataset_pushed_with_the_cli_is_published_and_listed(
    world: World, classifier: Trained, tmp_path: Path
) -> None:
    services = world.services
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO)
    services.tenancy.add_member("acme", "ops", roles=["owner"], actor="admin")
    acme = services.tenancy.create_key("acme", "ops", name="k", actor="admin").secret
    folder = tmp_path / "iris"
    folder.mkdir()
    (folder / "test.parquet").write_bytes(parquet_bytes({"X": classifier.x, "y": classifier.y}))
    (folder / "dataset.json").write_text(
        json.dumps(
            {
                "task": "classification",
                "license": "CC-BY-4.0",
                "columns": CLASSIFICATION_COLUMNS,
                "classes": ["setosa", "versicolor", "virginica"],
                "splits": [{"name": "test", "path": "test.parquet"}],
            }
        )
    )
    world.platform.close_client()
    server = LiveServer(services).start()
    try:
        args = ["datasets", "push", str(folder / "dataset.json"), "--dataset", "acme/iris-cli"]
        pushed = _cli(server, acme, *args, "--version", "1", "--public", "--json")
        assert pushed.exit_code == 0, pushed.output
        version = json.loads(pushed.output)
        assert version["splits"] == [{"name": "test", "rows": 300}]
        assert version["task"] == "classification" and version["license"] == "CC-BY-4.0"
        # The same push again publishes nothing new.
        again = _cli(server, acme, *args, "--version", "1")
        assert again.exit_code == 0 and "already published" in again.output
        listed = _cli(server, world.platform.key, "datasets", "list", "--json")
        assert listed.exit_code == 0, listed.output
        assert [d["name"] for d in json.loads(listed.output)["items"]] == ["iris-cli"]
        found = _cli(server, world.platform.key, "datasets", "search", "iris", "--json")
        assert found.exit_code == 0, found.output
        assert [d["name"] for d in json.loads(found.output)["items"]] == ["iris-cli"]
        none = _cli(server, world.platform.key, "datasets", "search", "iris", "--task", "chat")
        assert none.exit_code == 0 and "iris-cli" not in none.output
    finally:
        server.stop()
    # The blob was uploaded by acme's key: its tenant holds it.
    digest = version["manifest"]["splits"][0]["file"]["digest"]
    assert services.blobs.held_by("acme", digest)
