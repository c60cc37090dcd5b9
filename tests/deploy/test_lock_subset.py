"""scripts/lock_subset.py: the image installs the share of requirements/lock.txt its
extras need, every pin with its hashes, nothing of the dev tools."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import pytest

from tests.deploy.manifests import ROOT

LOCK = (ROOT / "requirements" / "lock.txt").read_text()
PYPROJECT = (ROOT / "pyproject.toml").read_text()


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "lock_subset", ROOT / "scripts" / "lock_subset.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock_subset = load()


def pinned(text: str) -> dict[str, int]:
    """name -> number of hashes, of a pip-compile style text."""
    found: dict[str, int] = {}
    current = ""
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", line)
        if match:
            current = lock_subset.canonical(match.group(1))
            found[current] = 0
        elif line.strip().startswith("--hash=sha256:"):
            found[current] += 1
    return found


def test_the_base_install_has_the_runtime_and_none_of_the_tools() -> None:
    share = pinned(lock_subset.subset(LOCK, PYPROJECT, []))
    for needed in ("fastapi", "uvicorn", "sqlalchemy", "psycopg-binary", "onnxruntime", "redis"):
        assert needed in share, needed
    # Pulled in by a dependency (uvicorn[standard], fastapi), not named by pyproject.toml.
    for transitive in ("uvloop", "starlette", "pydantic-core"):
        assert transitive in share, transitive
    for tool in (
        "pytest",
        "mypy",
        "ruff",
        "torch",
        "transformers",
        "helm-python-sdk",
        "playwright",
    ):
        assert tool not in share, tool
    assert all(count >= 1 for count in share.values()), "a pin without its hashes"
    assert set(share) <= set(pinned(LOCK))


def test_an_extra_brings_its_packages_and_theirs() -> None:
    base = pinned(lock_subset.subset(LOCK, PYPROJECT, []))
    llm = pinned(lock_subset.subset(LOCK, PYPROJECT, ["llm", "otel"]))
    assert set(base) < set(llm)
    for needed in ("torch", "transformers", "llama-cpp-python", "tokenizers", "opentelemetry-sdk"):
        assert needed in llm, needed
    assert "huggingface-hub" in llm, "transformers' own dependency"
    assert "pytest" not in llm


def test_pins_keep_their_lines_as_locked() -> None:
    share = lock_subset.subset(LOCK, PYPROJECT, [])
    block = re.search(r"^fastapi==.*?(?=^\S)", LOCK, re.MULTILINE | re.DOTALL)
    assert block is not None
    hashes = [line for line in block.group(0).splitlines() if "--hash=" in line]
    assert all(line in share.splitlines() for line in hashes)


def test_an_unknown_extra_is_refused() -> None:
    with pytest.raises(SystemExit, match=r"no extra gpu in pyproject\.toml"):
        lock_subset.subset(LOCK, PYPROJECT, ["gpu"])


def test_a_requirement_missing_from_the_lock_is_refused() -> None:
    pyproject = PYPROJECT.replace(
        '"fastapi>=0.115",', '"fastapi>=0.115",\n  "not-locked-anywhere>=1",'
    )
    with pytest.raises(SystemExit, match="not in the lock: not-locked-anywhere"):
        lock_subset.subset(LOCK, pyproject, [])


def test_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    lock = str(ROOT / "requirements" / "lock.txt")
    assert lock_subset.main([lock, str(ROOT / "pyproject.toml"), "otel"]) == 0
    assert "opentelemetry-sdk==" in capsys.readouterr().out
    assert lock_subset.main([]) == 2
