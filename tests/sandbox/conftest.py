"""A sandbox as validation gets it (bubblewrap, the system-call filter, the server's
home protected), and a way to run a probe script inside it."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from modelport.sandbox import Finished, Limits, Sandbox, SandboxMode, isolation_available
from tests.conftest import skip_or_fail

LIMITS = Limits(wall_seconds=60, cpu_seconds=30, memory_bytes=1 << 30)


@dataclass
class Probe:
    """What a probe script printed (its last line is a JSON object) and how it ended."""

    finished: Finished
    output: str

    @property
    def answer(self) -> dict[str, Any]:
        lines = [line for line in self.output.splitlines() if line.startswith("{")]
        assert lines, self.output
        return dict(json.loads(lines[-1]))


Runner = Callable[..., Probe]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The server's home: a database with a secret in it, and a signing key."""
    home = tmp_path / "home"
    (home / "keys").mkdir(parents=True)
    (home / "modelport.db").write_text("admin-key-hash and the ledger")
    (home / "keys" / "signing.pem").write_text("-----BEGIN PRIVATE KEY-----")
    return home


@pytest.fixture
def bubblewrap() -> None:
    if not isolation_available():
        skip_or_fail("the sandbox tests need bubblewrap (Debian: apt install bubblewrap)")


def make_runner(sandbox: Sandbox, tmp_path: Path) -> Runner:
    def run(code: str, *, limits: Limits = LIMITS) -> Probe:
        scratch = tmp_path / "scratch"
        (scratch / "files").mkdir(parents=True, exist_ok=True)
        (scratch / "files" / "model.onnx").write_bytes(b"weights")
        (scratch / "probe.py").write_text(textwrap.dedent(code))
        log = tmp_path / "probe.log"
        with log.open("wb") as output:
            finished = sandbox.run(
                ["probe.py"],
                scratch=scratch,
                readonly=[scratch / "files"],
                limits=limits,
                output=output,
            )
        return Probe(finished, log.read_text(errors="replace"))

    return run


@pytest.fixture
def run_inside(bubblewrap: None, home: Path, tmp_path: Path) -> Runner:
    """Runs a probe under bubblewrap and the system-call filter."""
    return make_runner(Sandbox(SandboxMode.AUTO, protect=[home]), tmp_path)
