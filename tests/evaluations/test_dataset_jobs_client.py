"""A dataset split as a batch job's input through the Python client
(``client.jobs.submit(..., input_dataset=, split=)``) and the CLI (``modelport jobs submit
--dataset --split``), and the client's asset search (``client.assets.search``); over real
HTTP against a live server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from modelport.cli import modelport
from modelport.client import Client, InvalidRequest, NotFound
from modelport.metering.types import BalanceScope
from tests.conftest import LiveServer
from tests.evaluations.conftest import CLASSIFICATION_COLUMNS, CLASSIFIER_IO, Trained, World

SPLIT = {"dataset": "acme/iris-rows:1", "split": "test"}


@pytest.fixture
def server(world: World, classifier: Trained) -> Iterator[LiveServer]:
    """acme/iris and the public dataset acme/iris-rows (its test split: the classifier's
    rows), served live; beta (the platform's key) is in credit."""
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    world.services.metering.balances.credit(BalanceScope.TENANT, "beta", 10**9, tenant="beta")
    world.dataset(
        "acme/iris-rows",
        {"test": {"X": classifier.x, "y": classifier.y}},
        CLASSIFICATION_COLUMNS,
        task="classification",
    )
    world.platform.close_client()
    live = LiveServer(world.services).start()
    yield live
    live.stop()


def _cli(server: LiveServer, key: str, *args: str) -> Result:
    base = ["--url", server.url, "--api-key", key]
    return CliRunner().invoke(modelport, [*base, *args])


def test_the_client_submits_a_dataset_split_as_a_batchs_input(
    world: World, classifier: Trained, server: LiveServer
) -> None:
    with Client(server.url, world.platform.key) as client:
        job = client.jobs.submit("acme/iris", input_dataset=SPLIT["dataset"], split="test")
        assert job.raw["input_dataset"]["dataset"] == SPLIT["dataset"]
        assert [s["implementation"] for s in job.stages] == ["tensor_shards", "tensor_publish"]
        world.jobs.drain()
        done = client.jobs.get(job.id)
        assert done.state == "succeeded", done.raw
        assert done.progress is not None and done.progress["rows_done"] == len(classifier.x)

        with pytest.raises(InvalidRequest) as unknown:
            client.jobs.submit("acme/iris", input_dataset=SPLIT["dataset"], split="validation")
        assert unknown.value.code == "unknown_split"
        with pytest.raises(NotFound) as missing:
            client.jobs.submit("acme/iris", input_dataset="acme/iris-rows:9", split="test")
        assert missing.value.code == "dataset_version_not_found"
        with pytest.raises(ValueError, match="both"):
            client.jobs.submit("acme/iris", input_dataset=SPLIT["dataset"])

        found = client.assets.search("iris", kind="dataset")
        assert [a.ref for a in found.items] == ["acme/iris-rows"]
        assert found.items[0].latest is not None and found.items[0].latest["version"] == "1"
        assert found.raw["total"] == 1
        assert client.assets.search("iris", kind="template").items == []


def test_the_cli_submits_a_dataset_split_as_a_batchs_input(
    world: World, server: LiveServer
) -> None:
    key = world.platform.key
    args = ["jobs", "submit", "acme/iris", "--dataset", SPLIT["dataset"], "--split", "test"]
    submitted = _cli(server, key, "--json", *args)
    assert submitted.exit_code == 0, submitted.output
    job = json.loads(submitted.output)
    assert job["input_dataset"]["dataset"] == SPLIT["dataset"]
    assert job["input_dataset"]["split"] == "test"

    refused = _cli(server, key, *args[:-1], "validation")
    assert refused.exit_code != 0 and "unknown_split" in refused.output
    alone = _cli(server, key, "jobs", "submit", "acme/iris", "--dataset", SPLIT["dataset"])
    assert alone.exit_code == 2 and "--dataset and --split go together" in alone.output
    both = _cli(server, key, *args, '{"X": [[1, 2, 3, 4]]}')
    assert both.exit_code == 2 and "not both" in both.output
