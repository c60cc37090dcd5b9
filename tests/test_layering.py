"""The dependency rule of docs/ARCHITECTURE.md, checked on the source's imports.

api/cli → services (registry, serving, jobs, metering, tenancy) → store, blobs, runtime.
Only ``modelport.app`` wires infrastructure; nothing imports it but the surfaces' entry points.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "modelport"

SURFACES = {"api", "cli"}
SERVICES = {"registry", "serving", "jobs", "metering", "tenancy", "inference"}
FOUNDATION = {"store", "blobs", "runtime"}
PLAIN = {"errors", "digests", "manifest", "config", "testing", "observability"}

FORBIDDEN: dict[str, set[str]] = {
    # the runtime is handed files and a manifest
    "runtime": SURFACES | SERVICES | {"store", "app"},
    "manifest": SURFACES | SERVICES | FOUNDATION | {"app", "observability"},
    "store": SURFACES | SERVICES | {"runtime", "app"},
    "blobs": SURFACES | SERVICES | {"runtime", "app"},
    "observability": SURFACES | {"app"},
    "registry": SURFACES | {"app"},
    "serving": SURFACES | {"app"},
    "metering": SURFACES | {"app"},
    "tenancy": SURFACES | {"app"},
    "jobs": SURFACES | {"app"},
    "inference": SURFACES | {"app"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name.split(".")[1] for name in found if name.startswith("modelport.")}


def _package_files() -> list[tuple[str, Path]]:
    files = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).parts
        top = parts[0].removesuffix(".py")
        if top in FORBIDDEN:
            files.append((top, path))
    return files


@pytest.mark.parametrize(
    ("package", "path"), _package_files(), ids=lambda v: str(v).rsplit("modelport/", 1)[-1]
)
def test_imports_follow_the_dependency_rule(package: str, path: Path) -> None:
    bad = _imports(path) & FORBIDDEN[package]
    assert not bad, f"{path.relative_to(SRC)} ({package}) must not import {sorted(bad)}"


def test_only_surfaces_import_the_composition_root() -> None:
    offenders = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "app" in _imports(path)
        and path.relative_to(SRC).parts[0] not in ("cli", "api", "app.py")
    ]
    assert not offenders
