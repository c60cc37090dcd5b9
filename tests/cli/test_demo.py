"""The quickstart's demo publishes, validates, approves, pulls, calls and bills a real
model, then publishes SmolLM2 and streams a chat through /v1, billed per token."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from modelport.cli.demo_chat import INPUT_TOKEN_MICROS, OUTPUT_TOKEN_MICROS, smollm2_gguf
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
        timeout=900,
    )


def _chat(stdout: str) -> tuple[str, int]:
    """The streamed answer and the ledger's charge, checked against prices times tokens."""
    answer = re.search(r"^assistant: (.*)$", stdout, re.M)
    assert answer is not None, stdout
    assert answer.group(1).strip()
    usage = re.search(r"^usage: prompt_tokens=(\d+) completion_tokens=(\d+)$", stdout, re.M)
    assert usage is not None, stdout
    prompt, completion = int(usage.group(1)), int(usage.group(2))
    assert prompt > 0 and completion > 0
    cost = prompt * INPUT_TOKEN_MICROS + completion * OUTPUT_TOKEN_MICROS
    price = f"price: {prompt} * {INPUT_TOKEN_MICROS} + {completion} * {OUTPUT_TOKEN_MICROS} = "
    assert price + f"{cost} micro-USD" in stdout
    assert f"the usage ledger charged acme-labs {cost} micro-USD for this chat" in stdout
    assert "/v1/chat/completions" in stdout.split("The chat model")[1]
    return answer.group(1), cost


# Two runs, each loading SmolLM2 to describe and serve it: minutes on a small CPU.
@pytest.mark.timeout(1200)
def test_demo_walkthrough_and_rerun(tmp_path: Path) -> None:
    gguf, why = smollm2_gguf()
    if gguf is None:
        pytest.skip(why)
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
    assert "published demo/smollm2-chat:1" in first.stdout
    assert "demo/smollm2-chat:1 is approved" in first.stdout
    _, chat_cost = _chat(first.stdout)

    probabilities = first.stdout.split("probabilities=")[1].split("\n")[0].split(", ")
    assert abs(sum(float(p) for p in probabilities) - 1.0) < 1e-3

    # A second run on the same home reuses its key and finds the version already there.
    second = _run_demo(home, free_port())
    assert second.returncode == 0, second.stdout + second.stderr
    assert "already published, identical: demo/iris-classifier:1" in second.stdout
    assert "already published, identical: demo/smollm2-chat:1" in second.stdout
    # The balance shows the first run's chat, charged at its tokens' prices.
    assert f"acme-labs has {985000 - chat_cost} micro-USD left" in second.stdout
    _chat(second.stdout)
