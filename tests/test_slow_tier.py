"""The fast tier stays fast: an unmarked test that starts a process fails, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = """
import subprocess
import sys

import pytest


def test_unmarked_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.slow
def test_marked_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_starts_the_validation_worker_only():
    subprocess.run([sys.executable, "-c", "pass", "modelport.registry.validation_worker"])


def test_unmarked_starts_nothing():
    pass
"""


@pytest.mark.slow
def test_an_unmarked_test_that_starts_a_process_fails(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.slow_tier",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rf",
            "-o",
            "markers=slow: slow",
            "test_sample.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "1 failed, 3 passed" in done.stdout, done.stdout + done.stderr
    assert "FAILED test_sample.py::test_unmarked_starts_a_process" in done.stdout
    assert "is not marked slow" in done.stdout
