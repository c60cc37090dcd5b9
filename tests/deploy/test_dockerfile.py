"""The container image's Dockerfile, read with a Dockerfile parser (dockerfile-parse):
its invariants hold without building it (docs/deploy.md says where it was built).
Multi-stage, non-root, a HEALTHCHECK on a path every role serves, the role as the
argument, dependencies only from the lock with hashes, no compilers in the runtime
stage, and a build context (.dockerignore) that holds every file it copies."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from modelport.config import Role
from tests.deploy import manifests
from tests.deploy.manifests import ROOT

ENTRYPOINT = ROOT / "deploy" / "docker" / "entrypoint.sh"


@pytest.fixture(scope="module")
def stages() -> list[list[dict[str, Any]]]:
    """The Dockerfile's instructions, by stage (what precedes the first FROM apart)."""
    parser = manifests.need("dockerfile_parse").DockerfileParser(
        path=str(ROOT / "Dockerfile"), cache_content=True
    )
    found: list[list[dict[str, Any]]] = [[]]
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            found.append([])
        if instruction["instruction"] != "COMMENT":
            found[-1].append(instruction)
    return found[1:]


def values(stage: list[dict[str, Any]], instruction: str) -> list[str]:
    return [i["value"] for i in stage if i["instruction"] == instruction]


def test_the_build_has_a_build_stage_and_a_runtime_stage(
    stages: list[list[dict[str, Any]]],
) -> None:
    assert len(stages) >= 2
    build, runtime = stages[0], stages[-1]
    assert values(build, "FROM")[0].endswith("AS build")
    assert any(v.startswith("EXTRAS=") for v in values(build, "ARG")), "extras: a build arg"
    copied = values(runtime, "COPY")
    assert "--from=build /opt/modelport /opt/modelport" in copied
    # The compilers stay in the build stage.
    for command in values(runtime, "RUN"):
        for tool in ("build-essential", "cmake", "gcc", "g++"):
            assert tool not in shlex.split(command), f"{tool} in the runtime stage"


def test_the_runtime_runs_as_a_non_root_user(stages: list[list[dict[str, Any]]]) -> None:
    users = values(stages[-1], "USER")
    assert users, "no USER: the image would run as root"
    user, _, group = users[-1].partition(":")
    assert user not in ("root", "0") and group not in ("root", "0")
    assert int(user) >= 10000, "a numeric uid, so runAsNonRoot can verify it"
    pod = (ROOT / "deploy" / "kustomize" / "base" / "gateway.yaml").read_text()
    assert f"runAsUser: {int(user)}" in pod


def test_the_healthcheck_asks_a_path_every_role_serves(
    stages: list[list[dict[str, Any]]], apps: manifests.RoleApps
) -> None:
    checks = values(stages[-1], "HEALTHCHECK")
    assert len(checks) == 1
    command = json.loads(checks[0].split("CMD", 1)[1])
    path = re.search(r"http://127\.0\.0\.1:[^/]+(/[a-z/]+)", " ".join(command))
    assert path is not None, command
    for role in (Role.GATEWAY, Role.WORKER):
        assert apps.status(role, path.group(1)) == 200, role


def test_the_role_is_the_argument(stages: list[list[dict[str, Any]]]) -> None:
    runtime = stages[-1]
    entrypoint = json.loads(values(runtime, "ENTRYPOINT")[-1])
    assert entrypoint[-1] == "modelport-entrypoint"
    assert "deploy/docker/entrypoint.sh /usr/local/bin/modelport-entrypoint" in values(
        runtime, "COPY"
    )
    assert json.loads(values(runtime, "CMD")[-1]) == [Role.ALL.value]
    # The script's serving roles are exactly the platform's.
    script = ENTRYPOINT.read_text()
    serving = re.search(r"^\s*([a-z|]+)\)\s*$", script, re.MULTILINE)
    assert serving is not None
    assert set(serving.group(1).split("|")) == {role.value for role in Role}
    assert os.access(ENTRYPOINT, os.X_OK)


def test_dependencies_come_from_the_lock_with_hashes(
    stages: list[list[dict[str, Any]]],
) -> None:
    runs = [v for stage in stages for v in values(stage, "RUN")]
    assert any("scripts/lock_subset.py requirements/lock.txt" in run for run in runs)
    installs = 0
    for run in runs:
        for words in commands(run):
            if not words or not words[0].endswith("pip") or words[1] not in ("install", "wheel"):
                continue
            installs += 1
            # Either hash-checked from a lock share, or the wheels built here, offline.
            assert "--require-hashes" in words or "--no-index" in words, words
    assert installs >= 3
    everything = "\n".join(i["value"] for stage in stages for i in stage)
    assert "ADD " not in everything and not re.search(r"\b(curl|wget)\b", everything)


def commands(run: str) -> list[list[str]]:
    """The simple commands of a shell line (split at ``&&``, ``;``, ``|``, and the
    keywords of ``if``), each as its words, quotes respected; environment assignments
    before a command dropped."""
    lexer = shlex.shlex(run, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    found: list[list[str]] = [[]]
    for token in lexer:
        if token in ("&&", ";", "||", "|", "then", "fi", "if", "else", ">", "<"):
            found.append([])
        elif not (not found[-1] and re.match(r"^[A-Z_]+=", token)):
            found[-1].append(token)
    return [words for words in found if words]


def test_commands_split_a_run_line() -> None:
    run = "A=1 pip install x && if grep -q 'a;b' f; then awk '{print}' g > h; fi"
    assert commands(run) == [
        ["pip", "install", "x"],
        ["grep", "-q", "a;b", "f"],
        ["awk", "{print}", "g"],
        ["h"],
    ]


def admitted(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore's patterns (the last match wins) leave ``path`` in."""
    keep = True
    for pattern in patterns:
        negate = pattern.startswith("!")
        bare = pattern.removeprefix("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        if any(fnmatch.fnmatch(p, bare) for p in prefixes) or fnmatch.fnmatch(path, bare):
            keep = negate
    return keep


def test_the_build_context_holds_what_the_dockerfile_copies(
    stages: list[list[dict[str, Any]]],
) -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    sources = []
    for stage in stages:
        for value in values(stage, "COPY"):
            words = value.split()
            if words[0].startswith("--from"):
                continue
            sources.extend(words[:-1])
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert admitted(source, patterns), f"{source} is left out by .dockerignore"
    # What must stay out: the tests, the virtual environment, the git history.
    for outside in ("tests/conftest.py", ".venv/bin/python", ".git/HEAD", "docs/deploy.md"):
        assert not admitted(outside, patterns), outside


def test_the_context_check_can_tell() -> None:
    patterns = ["*", "!src/", "**/__pycache__"]
    assert admitted("src/modelport/app.py", patterns)
    assert not admitted("tests/x.py", patterns)
    assert not admitted("src/modelport/__pycache__", patterns)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["gateway"], "serve --host 0.0.0.0 --port 8080 --role gateway"),
        (
            ["worker", "--log-level", "debug"],
            "serve --host 0.0.0.0 --port 8080 --role worker --log-level debug",
        ),
        ([], "serve --host 0.0.0.0 --port 8080 --role all"),
        (["migrate"], "migrate"),
        (["modelport", "keys", "list"], "keys list"),
    ],
)
def test_the_entrypoint_runs_each_role(tmp_path: Path, argv: list[str], expected: str) -> None:
    fake = tmp_path / "modelport"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    done = subprocess.run(
        ["sh", str(ENTRYPOINT), *argv], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


@pytest.mark.slow
def test_the_entrypoint_refuses_an_unknown_role(tmp_path: Path) -> None:
    done = subprocess.run(
        ["sh", str(ENTRYPOINT), "gatewy"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 64
    assert "unknown role 'gatewy'" in done.stderr
