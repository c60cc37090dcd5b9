"""Model hosts' scratch folders: each server process keeps its own, and a server that
starts removes those of servers that are gone (killed before they could clean up),
never a live one's."""

from __future__ import annotations

import os
from pathlib import Path

from modelport.runtime.process.launching import SandboxLauncher
from modelport.sandbox import Sandbox, SandboxMode


def test_a_starting_server_sweeps_only_dead_servers_scratch(tmp_path: Path) -> None:
    # Above the kernel's largest pid: no process has it.
    gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    dead = tmp_path / f"server-{gone}"
    (dead / "model-host-abc").mkdir(parents=True)
    (dead / "model-host-abc" / "left.bin").write_bytes(b"x")
    live = tmp_path / "server-1"  # init: alive as long as the machine is
    live.mkdir()
    other = tmp_path / "not-a-server"
    other.mkdir()

    launcher = SandboxLauncher(Sandbox(SandboxMode.UNISOLATED), scratch_root=tmp_path)

    assert not dead.exists()
    assert live.is_dir() and other.is_dir()
    assert launcher.scratch_root == tmp_path / f"server-{os.getpid()}"
