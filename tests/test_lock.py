"""The lock files agree with pyproject.toml: every requirement that pyproject.toml (with
every extra) and ``requirements/pins.in`` declare is pinned in ``requirements/lock.txt``
to a version its range admits, and every pin carries a hash. A change to pyproject.toml
without ``./scripts/lock.sh`` fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"
MODELS = ROOT / "requirements" / "models.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*(?:;[^\\]*)?\\?$")


def pins(path: Path) -> dict[str, tuple[Version, list[str]]]:
    """name -> (pinned version, hashes), from a pip-compile style file."""
    found: dict[str, tuple[Version, list[str]]] = {}
    current = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            assert current not in found, f"{path.name}: {current} is pinned twice"
            found[current] = (Version(match.group(2)), [])
        elif line.startswith("--hash=sha256:"):
            assert current, f"{path.name}: a hash before any pin: {line}"
            found[current][1].append(line.removeprefix("--hash=sha256:").rstrip(" \\"))
        else:
            pytest.fail(f"{path.name}: a line that is neither a pin nor a hash: {line!r}")
    return found


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        texts.extend(extra)
    for line in (ROOT / "requirements" / "pins.in").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            texts.append(line.strip())
    return [Requirement(text) for text in texts]


def test_every_declared_requirement_is_pinned_within_its_range() -> None:
    locked = pins(LOCK)
    disagreements = []
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        if name not in locked:
            disagreements.append(f"{requirement} is not in the lock")
            continue
        version = locked[name][0]
        if not requirement.specifier.contains(version, prereleases=True):
            disagreements.append(f"{requirement} does not admit the locked {version}")
    assert not disagreements, "run ./scripts/lock.sh: " + "; ".join(disagreements)


def test_every_pin_has_a_hash() -> None:
    for path in (LOCK, MODELS):
        unhashed = [name for name, (_, hashes) in pins(path).items() if not hashes]
        assert not unhashed, f"{path.name} pins without a hash: {unhashed}"
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for _, hs in pins(path).values() for h in hs)


def test_the_parser_sees_a_disagreement(tmp_path: Path) -> None:
    """The check above can fail: a range the lock's version is outside of is reported."""
    requirement = Requirement("openai>=999")
    version = pins(LOCK)[canonicalize_name("openai")][0]
    assert not requirement.specifier.contains(version, prereleases=True)
    broken = tmp_path / "lock.txt"
    broken.write_text("openai==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\nnot a pin\n")
    with pytest.raises(pytest.fail.Exception, match="neither a pin nor a hash"):
        pins(broken)
