"""The quickstart's demo publishes, validates, approves, pulls, calls and bills a real
model (the iris classifier it trains), then publishes SmolLM2 and streams a chat through
/v1, billed per token and decoded greedily (the same answer on every run). Its log is
quiet unless ``--verbose``; it prints the console's address and keys; SIGTERM ends it
with one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from modelport.cli.demo_chat import INPUT_TOKEN_MICROS, OUTPUT_TOKEN_MICROS, smollm2_gguf
from tests.conftest import free_port

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # starts real processes


def _command(home: Path, port: int, *options: str) -> list[str]:
    demo = [sys.executable, "-m", "modelport.cli", "demo"]
    return [*demo, "--home", str(home), "--port", str(port), *options]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    return env | {"PYTHONUNBUFFERED": "1"}  # its lines as they are printed


def _run_demo(home: Path, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(home, port, "--no-serve"),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


def _serve_then_terminate(home: Path, port: int) -> tuple[str, str, int]:
    """Run the demo serving (``--verbose``) until it prints its instructions, then send
    SIGTERM: its stdout, stderr and exit status."""
    process = subprocess.Popen(
        _command(home, port, "--verbose"),
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines = []
    try:
        for line in process.stdout:  # blocks on the demo's own output, no polling
            lines.append(line)
            if line.startswith("serving on http") and "until Ctrl-C or SIGTERM" in line:
                break
        process.send_signal(signal.SIGTERM)
        rest, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return "".join(lines) + rest, err, process.returncode


def _quiet(stderr: str) -> None:
    """No record of every HTTP request, no progress bar of the GGUF loader."""
    assert "HTTP Request:" not in stderr, stderr
    assert "Converting and de-quantizing" not in stderr, stderr


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
    _quiet(first.stderr)
    # The console's address and the keys to sign in with.
    consumer_key = (home / "consumer-key").read_text().strip()
    admin_key = (home / "admin-key").read_text().strip()
    console = first.stdout[first.stdout.index("The web console") :]
    assert "/console and sign in" in console.splitlines()[0]
    assert consumer_key in console and admin_key in console

    pulled = home / "pulled"
    original = (home / "demo-model" / "model.onnx").read_bytes()
    assert (pulled / "model.onnx").read_bytes() == original
    manifest = orjson.loads((pulled / "manifest.json").read_bytes())
    assert manifest["files"][0]["size"] == len(original)

    # The consumer tenant paid 2,500 micro-USD for each of its three calls.
    assert "acme-labs has 992500 micro-USD left" in first.stdout
    assert "published demo/smollm2-chat:1" in first.stdout
    assert "demo/smollm2-chat:1 is approved" in first.stdout
    answer, chat_cost = _chat(first.stdout)

    # The trained classifier says the first example row (a setosa) is a setosa.
    probabilities = first.stdout.split("probabilities=")[1].split("\n")[0].split(", ")
    assert abs(sum(float(p) for p in probabilities) - 1.0) < 1e-3
    assert float(probabilities[0]) > 0.9

    # A second run on the same home reuses its key and finds the version already there;
    # serving (--verbose: every request logged) until SIGTERM, which ends it in one line.
    stdout, stderr, status = _serve_then_terminate(home, free_port())
    assert status == 0, stdout + stderr
    assert "already published, identical: demo/iris-classifier:1" in stdout
    assert "already published, identical: demo/smollm2-chat:1" in stdout
    # The balance shows the first run's chat, charged at its tokens' prices.
    assert f"acme-labs has {985000 - chat_cost} micro-USD left" in stdout
    # Greedy decoding: the same answer as the first run's.
    assert _chat(stdout)[0] == answer
    assert "HTTP Request:" in stderr
    stopped = [line for line in stderr.splitlines() if line.startswith("modelport demo stopped")]
    assert stopped == [f"modelport demo stopped (SIGTERM); its state is kept in {home}"], stderr
    assert "Traceback" not in stderr
