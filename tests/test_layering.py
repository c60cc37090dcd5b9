"""The dependency rule of docs/ARCHITECTURE.md, checked on the source's imports.

api/cli → services (registry, serving, jobs, metering, tenancy) → store, blobs, runtime.
Only ``modelport.app`` wires infrastructure; nothing imports it but the surfaces' entry points.
No two packages import each other (directly or round a longer cycle), a service reads
another service's data through that service, never through its ``repository`` module, and
importing a module of ``modelport.api`` does not load the FastAPI app.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "modelport"

SURFACES = {"api", "cli"}
SERVICES = {
    "registry",
    "serving",
    "jobs",
    "metering",
    "tenancy",
    "inference",
    "files",
    "webhooks",
    "moderation",
    "datasets",
    "evaluations",
    "monitoring",
    "templates",
    "assets",
}
FOUNDATION = {"store", "blobs", "runtime", "sandbox"}
PLAIN = {"errors", "digests", "manifest", "config", "testing", "observability"}

FORBIDDEN: dict[str, set[str]] = {
    # the runtime is handed files and a manifest
    "runtime": SURFACES | SERVICES | {"store", "app"},
    "manifest": SURFACES | SERVICES | FOUNDATION | {"app", "observability"},
    "store": SURFACES | SERVICES | {"runtime", "app"},
    "blobs": SURFACES | SERVICES | {"runtime", "app"},
    # the sandbox runs other people's code: it knows nothing of the platform
    "sandbox": SURFACES | SERVICES | {"store", "blobs", "runtime", "app", "observability"},
    "observability": SURFACES | {"app"},
    "registry": SURFACES | {"app"},
    "serving": SURFACES | {"app"},
    "metering": SURFACES | {"app"},
    "tenancy": SURFACES | {"app"},
    "jobs": SURFACES | {"app"},
    "files": SURFACES | {"app"},
    "inference": SURFACES | {"app"},
    "webhooks": SURFACES | {"app"},
    "moderation": SURFACES | {"app", "inference"},
    "datasets": SURFACES | {"app", "evaluations", "inference"},
    "evaluations": SURFACES | {"app"},
    "monitoring": SURFACES | {"app"},
    "templates": SURFACES | {"app"},
    "assets": SURFACES | {"app"},
    # the web console calls the platform's own HTTP API, in process: no service directly
    # (tenancy only for the API key format, to name the key it signs in with)
    "console": (SERVICES - {"tenancy"}) | {"runtime", "blobs", "app", "api"},
    # the Python client talks HTTP: it builds nothing of the server's
    "client": SURFACES | SERVICES | {"store", "blobs", "app", "observability"},
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


def _runtime_imports(path: Path) -> dict[str, int]:
    """Absolute ``modelport.*`` modules ``path`` imports when it runs (imports under
    ``if TYPE_CHECKING:`` only name types, and make no cycle), with a line of each."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from modelport.x import repository`` imports the module x.repository
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.startswith("modelport."):
                found.setdefault(name, node.lineno)
    return found


def _top(path: Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


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


def _package_graph() -> dict[str, dict[str, str]]:
    """Package -> package it imports at run time -> where (the first such import)."""
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        source = _top(path)
        for name, line in _runtime_imports(path).items():
            target = name.split(".")[1]
            if target != source:
                where = f"{path.relative_to(SRC)}:{line} imports {name}"
                graph.setdefault(source, {}).setdefault(target, where)
    return graph


def _cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_between_packages() -> None:
    graph = _package_graph()
    problems = [
        f"{' <-> '.join(cycle)}: "
        + "; ".join(graph[a][b] for a in cycle for b in cycle if b in graph.get(a, {}))
        for cycle in _cycles(graph)
    ]
    assert not problems, "import cycles between packages:\n" + "\n".join(problems)


def test_the_cycle_finder_finds_a_longer_cycle() -> None:
    graph = {"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}, "d": {"a": ""}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": ""}, "b": {}}) == []


def test_no_service_imports_another_services_repository() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        source = _top(path)
        if source not in SERVICES:
            continue
        for name, line in _runtime_imports(path).items():
            parts = name.split(".")
            if parts[1] in SERVICES and parts[1] != source and parts[-1] == "repository":
                offenders.append(f"{path.relative_to(SRC)}:{line} imports {name}")
    assert not offenders, "a service may not read another's repository:\n" + "\n".join(offenders)


@pytest.mark.slow  # a fresh interpreter: this one has loaded the app already
def test_importing_an_api_module_does_not_load_the_app() -> None:
    code = (
        "import sys, modelport.api.problems\n"
        "loaded = [m for m in ('modelport.api.app', 'modelport.app') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "from modelport.api import create_app\n"
        "assert callable(create_app) and 'modelport.api.app' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow  # a fresh interpreter: this one may have imported torch already
def test_building_the_services_does_not_import_torch(tmp_path: Path) -> None:
    """The llm extra is wired (its plugins constructed) without importing torch or
    transformers: they load with the first transformers model."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from modelport.app import build_services\n"
        "from modelport.config import Settings\n"
        f"services = build_services(Settings(home=Path({str(tmp_path)!r}), admin_key='k' * 30))\n"
        "services.close()\n"
        "loaded = [m for m in ('torch', 'transformers') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow  # a fresh interpreter, with the oidc extra's libraries made unimportable
def test_the_platform_serves_without_the_oidc_extra(tmp_path: Path) -> None:
    """authlib and joserfc are the ``oidc`` extra's: a process without them (the
    container image's default extras) builds and serves; only configuring OpenID
    Connect needs them."""
    code = (
        "import sys\n"
        "sys.modules['joserfc'] = sys.modules['authlib'] = None\n"
        "from pathlib import Path\n"
        "from starlette.testclient import TestClient\n"
        "from modelport.api import create_app\n"
        "from modelport.app import build_services\n"
        "from modelport.config import Settings\n"
        f"services = build_services(Settings(home=Path({str(tmp_path)!r}), admin_key='k' * 30))\n"
        "with TestClient(create_app(services)) as client:\n"
        "    assert client.get('/healthz').status_code == 200\n"
        "    assert client.get('/console/sign-in').status_code == 200\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
