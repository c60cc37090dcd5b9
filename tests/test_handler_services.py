"""Handlers take the services they use (``modelport.api.deps``' one dependency per
service), never the whole ``Services`` bag: checked on the source of the route modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "modelport"
ROUTE_PACKAGES = ("api/routes", "api/openai", "api/v2")
BAG = {"get_services", "Services"}


def route_modules() -> list[Path]:
    return sorted(p for package in ROUTE_PACKAGES for p in (SRC / package).rglob("*.py"))


def bag_uses(source: str) -> list[str]:
    """Where a module names the whole bag: imports, calls, annotations, attributes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [f"{node.lineno}: imports {a.name}" for a in node.names if a.name in BAG]
        elif isinstance(node, ast.Name) and node.id in BAG:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in BAG:
            found.append(f"{node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.strip() in BAG  # a string annotation ("Services") is a use too
        ):
            found.append(f"{node.lineno}: {node.value!r}")
    return found


def test_the_check_sees_every_way_of_naming_the_bag() -> None:
    source = (
        "from modelport.api.deps import get_services\n"
        "from modelport.app import Services\n"
        "def a(request): return deps.get_services(request).registry\n"
        "def b(services: 'Services'): ...\n"
    )
    assert len(bag_uses(source)) == 4
    assert bag_uses("def c(registry: deps.Registry): return registry.get_model('a', 'b')\n") == []


def test_there_are_route_modules_to_check() -> None:
    assert len(route_modules()) > 30


@pytest.mark.parametrize("path", route_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_route_module_takes_the_whole_services(path: Path) -> None:
    assert bag_uses(path.read_text()) == []


def test_only_the_dependencies_module_reads_the_bag_from_a_request() -> None:
    # The app factories hold the bag (they build the app from it), and the audit record
    # is written by the envelope from the scope's app: neither calls ``get_services``.
    callers = [
        str(p.relative_to(SRC))
        for p in sorted((SRC / "api").rglob("*.py"))
        if p.name != "deps.py" and "get_services" in p.read_text()
    ]
    assert callers == []
