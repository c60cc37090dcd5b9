"""The quickstart's demo publishes, validates, approves, pulls, calls and bills a real model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.slow  # starts real processes


def _run_demo(home: Path, port: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "modelport.cli",
            "demo",
            "--home",
            str(home),
            "--port",
            str(port),
            "--no-serve",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_demo_walkthrough_and_rerun(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    first = _run_demo(home, free_port())
    assert first.returncode == 0, first.stdout + first.stderr
    assert "published demo/iris-classifier:1" in first.stdout
    assert "is validated" in first.stdout and "is approved" in first.stdout
    assert "model_version=1 probabilities=" in first.stdout

    pulled = home / "pulled"
    original = (home / "demo-model" / "model.onnx").read_bytes()
    assert (pulled / "model.onnx").read_bytes() == original
    manifest = orjson.loads((pulled / "manifest.json").read_bytes())
    assert manifest["files"][0]["size"] == len(original)

    # The consumer tenant paid 2,500 micro-USD for each of its three calls.
    assert "acme-labs has 992500 micro-USD left" in first.stdout

    probabilities = first.stdout.split("probabilities=")[1].split("\n")[0].split(", ")
    assert abs(sum(float(p) for p in probabilities) - 1.0) < 1e-3

    # A second run on the same home reuses its key and finds the version already there.
    second = _run_demo(home, free_port())
    assert second.returncode == 0, second.stdout + second.stderr
    assert "already published, identical: demo/iris-classifier:1" in second.stdout
    assert "acme-labs has 985000 micro-USD left" in second.stdout
