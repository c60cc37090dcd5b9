"""Each sandboxed child in a capped cgroup of its own, where the host lets the server
make one (detected once at start-up), and the resource limits alone where it does not,
said once at start-up and in every report."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from modelport.app import build_cgroups, build_sandbox
from modelport.config import Settings
from modelport.observability.metrics import RuntimeMetrics
from modelport.sandbox import Enforcement, Limits, Sandbox, SandboxMode
from modelport.sandbox.cgroups import Cgroups, detect, enter
from tests.sandbox.conftest import make_runner


def host_cgroups() -> Cgroups:
    """What this host gives (the same detection the server makes at start-up)."""
    cgroups = build_cgroups("auto", None)
    if cgroups.enforcement is Enforcement.RLIMITS:
        pytest.skip(f"this host gives the server no cgroup it can write: {cgroups.reason}")
    return cgroups


def test_off_and_a_host_without_cgroups_fall_back_to_the_resource_limits(tmp_path: Path) -> None:
    off = detect("off")
    assert off.enforcement is Enforcement.RLIMITS
    assert "MODELPORT_SANDBOX_CGROUP is off" in off.reason
    assert off.create(Limits(wall_seconds=1, cpu_seconds=1, memory_bytes=1 << 20)) is None
    # A /proc that shows no cgroup hierarchy at all (a container without /sys/fs/cgroup).
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mounts").write_text("proc /proc proc rw 0 0\n")
    (tmp_path / "self" / "cgroup").write_text("0::/\n")
    bare = detect("auto", proc=tmp_path)
    assert bare.enforcement is Enforcement.RLIMITS
    assert "no cgroup v2 subtree and no v1" in bare.reason


def test_a_root_the_server_cannot_write_is_a_fallback_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("memory cpu pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    # A folder that looks like a v2 cgroup but is not one: no memory.max appears in the
    # groups made there, so the probe's write of the caps fails.
    cgroups = detect("auto", tmp_path, proc=tmp_path / "no-proc")
    assert cgroups.enforcement is Enforcement.RLIMITS
    assert f"cgroup v2 at {tmp_path}" in cgroups.reason
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("modelport-")]


def test_the_fallback_is_said_once_at_start_up_and_in_the_metrics(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="modelport.sandbox")
    build_cgroups.cache_clear()
    metrics = RuntimeMetrics()
    settings = Settings(home=tmp_path / "home", sandbox="unisolated", sandbox_cgroup="off")
    sandbox = build_sandbox(settings, metrics)
    build_sandbox(settings)  # the processing pools' sandbox: detected once per process
    said = [r for r in caplog.records if getattr(r, "event", None) == "sandbox.cgroup_unavailable"]
    assert len(said) == 1
    assert said[0].fields["reason"] == "MODELPORT_SANDBOX_CGROUP is off"  # type: ignore[attr-defined]
    assert "resource limits only" in said[0].fields["fallback"]  # type: ignore[attr-defined]
    assert sandbox.confinement().as_dict()["limits"] == "rlimits"
    sample = metrics.registry.get_sample_value
    assert sample("modelport_sandbox_limits", {"mechanism": "rlimits"}) == 1


@pytest.mark.slow
def test_a_child_runs_in_its_own_capped_cgroup_removed_after(tmp_path: Path) -> None:
    """Unisolated, the child sees the host's cgroup files: it reads its own caps."""
    cgroups = host_cgroups()
    sandbox = Sandbox(SandboxMode.UNISOLATED, cgroups=cgroups)
    limits = Limits(
        wall_seconds=60,
        cpu_seconds=30,
        memory_bytes=1 << 30,
        cpu_cores=0.5,
        processes=40,
    )
    probe = make_runner(sandbox, tmp_path)(CAPS, limits=limits)
    assert probe.finished.returncode == 0, probe.output
    assert probe.finished.confinement.enforcement is cgroups.enforcement
    caps = probe.answer
    if cgroups.enforcement is Enforcement.CGROUP1:
        assert caps["memory/memory.limit_in_bytes"] == str(1 << 30)
        assert caps["cpu/cpu.cfs_quota_us"] == "50000"
        assert caps["cpu/cpu.cfs_period_us"] == "100000"
        assert caps["pids/pids.max"] == "40"
    else:
        assert caps["/memory.max"] == str(1 << 30)
        assert caps["/cpu.max"] == "50000 100000"
        assert caps["/pids.max"] == "40"
    # Its group is gone once it has ended.
    assert not any(Path(folder).exists() for folder in caps["folders"])


CAPS = """
import json
from pathlib import Path

found, folders = {}, []
for line in Path("/proc/self/cgroup").read_text().splitlines():
    _, controllers, group = line.split(":", 2)
    for controller in controllers.split(",") if controllers else [""]:
        root = Path("/sys/fs/cgroup") / controller if controller else Path("/sys/fs/cgroup")
        for name in ("memory.limit_in_bytes", "cpu.cfs_quota_us", "cpu.cfs_period_us",
                     "pids.max", "memory.max", "cpu.max"):
            path = root / group.lstrip("/") / name
            if path.is_file():
                found[f"{controller}/{name}"] = path.read_text().strip()
                folders.append(str(path.parent))
print(json.dumps({**found, "folders": sorted(set(folders))}))
"""


def test_caps_come_from_the_operators_settings(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path / "home",
        sandbox_tmp_bytes=4 << 20,
        sandbox_file_bytes=3 << 20,
        sandbox_cpu_cores=1.5,
        sandbox_processes=100,
    )
    limits = build_sandbox(settings).limits(wall_seconds=9, cpu_seconds=8, memory_bytes=7 << 20)
    assert limits == Limits(
        wall_seconds=9,
        cpu_seconds=8,
        memory_bytes=7 << 20,
        file_bytes=3 << 20,
        tmp_bytes=4 << 20,
        cpu_cores=1.5,
        processes=100,
    )
    defaults = Settings(home=tmp_path / "home")
    assert (defaults.sandbox.tmp_bytes, defaults.sandbox.file_bytes) == (64 << 20, 1 << 30)


def test_the_v2_caps_as_written_in_a_delegated_subtree(tmp_path: Path) -> None:
    """This host has cgroup v1 only: a folder stands in for the delegated v2 subtree (a
    real one makes each group's files itself), to check what is written where."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    own = tmp_path / f"modelport-{os.getpid()}"
    own.mkdir()
    (own / "cgroup.subtree_control").write_text("")
    cgroups = detect("auto", tmp_path, proc=tmp_path / "no-proc")
    assert cgroups.enforcement is Enforcement.CGROUP2, cgroups.reason
    assert (own / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"
    limits = Limits(
        wall_seconds=1, cpu_seconds=1, memory_bytes=300 << 20, cpu_cores=1.5, processes=33
    )
    cgroup = cgroups.create(limits)
    assert cgroup is not None
    [procs] = cgroup.procs
    group = procs.parent
    assert group.parent == own
    assert (group / "memory.max").read_text() == str(300 << 20)
    assert (group / "memory.swap.max").read_text() == "0"
    assert (group / "cpu.max").read_text() == "150000 100000"
    assert (group / "pids.max").read_text() == "33"
    (group / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert cgroup.cpu_seconds() == 2.5
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert cgroup.oom_killed() is True
    assert enter(cgroup, ["python", "-m", "x"])[-5:] == [str(procs), "--", "python", "-m", "x"]
