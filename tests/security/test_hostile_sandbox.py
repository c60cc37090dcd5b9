"""A hostile package: code a publisher ships (validation runs it, and warm workers run
its processing code) turns on the machine from inside the sandbox. It calls what the
system-call filter must refuse, reads the server's environment and memory through
``/proc``, fills ``/tmp`` and the disk, its memory past its cgroup's cap, forks without
end; each is contained and reported, under bubblewrap and ``unisolated`` alike where
both apply.

Calls that Python does not expose go through ``ctypes`` (``syscall(number, ...)``, with
the numbers of x86_64 and aarch64), with arguments a kernel that reached them would
mostly refuse with another error (EBADF, EFAULT, EINVAL): EPERM is the filter's."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from modelport.app import build_cgroups, build_sandbox
from modelport.config import Settings
from modelport.sandbox import Enforcement, Limits, Sandbox, SandboxMode, isolation_available
from modelport.sandbox.cgroups import Cgroups
from tests.conftest import skip_or_fail
from tests.sandbox.conftest import LIMITS, make_runner

pytestmark = pytest.mark.slow  # each probe is a process

MODES = [SandboxMode.BUBBLEWRAP, SandboxMode.UNISOLATED]


def _sandbox(mode: SandboxMode) -> Sandbox:
    if mode is SandboxMode.BUBBLEWRAP and not isolation_available():
        skip_or_fail("the sandbox tests need bubblewrap (Debian: apt install bubblewrap)")
    return Sandbox(mode)


SYSCALLS = r"""
import ctypes, errno, json, os, platform, resource, signal, socket, threading

NUMBERS = {  # name: (x86_64, aarch64)
    "io_uring_setup": (425, 425), "io_uring_register": (427, 427),
    "bpf": (321, 280), "keyctl": (250, 219), "add_key": (248, 217),
    "perf_event_open": (298, 241), "userfaultfd": (323, 282), "ptrace": (101, 117),
    "process_vm_readv": (310, 270), "kcmp": (312, 272), "unshare": (272, 97),
    "setns": (308, 268), "mount": (165, 40), "chroot": (161, 51),
    "init_module": (175, 105), "kexec_load": (246, 104), "open_by_handle_at": (304, 265),
    "personality": (135, 92), "socket": (41, 198),
}
COLUMN = {"x86_64": 0, "aarch64": 1}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
scratch = ctypes.create_string_buffer(512)  # zeroed: an empty params/attr struct
parent = os.getppid()
found = {}

def raw(name, *args):
    ctypes.set_errno(0)
    values = [a if not isinstance(a, int) else ctypes.c_long(a) for a in args]
    done = libc.syscall(NUMBERS[name][COLUMN], *values)
    return "allowed" if done != -1 else ctypes.get_errno()

def python(call):
    try:
        result = call()
    except OSError as exc:
        return exc.errno
    if isinstance(result, socket.socket):
        result.close()
    return "allowed"

# io_uring: the ring that opened an AF_INET socket around the socket() rule.
found["io_uring_setup"] = raw("io_uring_setup", 8, scratch)
found["io_uring_register"] = raw("io_uring_register", -1, 0, 0, 0)
found["bpf"] = raw("bpf", 0, scratch, 72)
found["keyctl"] = raw("keyctl", 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
found["add_key"] = raw("add_key", ctypes.c_char_p(b"user"), ctypes.c_char_p(b"probe"),
                       scratch, 4, -2)
found["perf_event_open"] = raw("perf_event_open", scratch, 0, -1, -1, 0)
found["userfaultfd"] = raw("userfaultfd", 0)
# Attach to the process that started it (SEIZE: attached without stopping it).
found["ptrace_attach_parent"] = raw("ptrace", 0x4206, parent, 0, 0)
found["process_vm_readv_parent"] = raw("process_vm_readv", parent, 0, 0, 0, 0, 0)
found["kcmp_parent"] = raw("kcmp", os.getpid(), parent, 0, 0, 0)
found["pidfd_open_parent"] = python(lambda: os.close(os.pidfd_open(parent)))
found["kill_parent"] = python(lambda: os.kill(parent, 0))
found["prlimit_parent"] = python(lambda: resource.prlimit(parent, resource.RLIMIT_NOFILE))
found["setns"] = raw("setns", -1, 0)
found["mount"] = raw("mount", 0, 0, 0, 0, 0)
found["chroot"] = raw("chroot", ctypes.c_char_p(b"/"))
found["init_module"] = raw("init_module", 0, 0, 0)
found["kexec_load"] = raw("kexec_load", 0, 0, 0, 0)
found["open_by_handle_at"] = raw("open_by_handle_at", -1, 0, 0)
found["personality"] = raw("personality", 0xFFFFFFFF)
for family in ("AF_INET", "AF_INET6", "AF_PACKET", "AF_NETLINK", "AF_VSOCK"):
    found[f"socket_{family}"] = python(lambda: socket.socket(getattr(socket, family)))
# AF_INET with a high bit set: the kernel reads an int, a deny-list a long.
found["socket_AF_INET_high_bits"] = raw("socket", socket.AF_INET | (1 << 32),
                                        socket.SOCK_STREAM, 0)
found["fork"] = python(os.fork)
found["execve"] = python(lambda: os.execv("/usr/bin/true", ["true"]))
# Last: on a machine that allows it, it would change who this process is.
found["unshare_user"] = raw("unshare", 0x10000000)

# What the work legitimately does still works.
allowed = {}
allowed["thread"] = python(lambda: (lambda t: (t.start(), t.join()))(threading.Thread(target=int)))
allowed["socketpair_AF_UNIX"] = python(lambda: [s.close() for s in socket.socketpair()])
allowed["kill_self"] = python(lambda: os.kill(os.getpid(), 0))
allowed["prlimit_self"] = python(lambda: resource.prlimit(0, resource.RLIMIT_NOFILE))
allowed["mmap"] = python(lambda: __import__("mmap").mmap(-1, 1 << 20).close())
print(json.dumps({"denied": found, "allowed": allowed}))
"""

DENIED = [
    "io_uring_setup", "io_uring_register", "bpf", "keyctl", "add_key", "perf_event_open",
    "userfaultfd", "ptrace_attach_parent", "process_vm_readv_parent", "kcmp_parent",
    "pidfd_open_parent", "kill_parent", "prlimit_parent", "setns", "mount", "chroot",
    "init_module", "kexec_load", "open_by_handle_at", "personality", "socket_AF_INET",
    "socket_AF_INET6", "socket_AF_PACKET", "socket_AF_NETLINK", "socket_AF_VSOCK",
    "socket_AF_INET_high_bits", "fork", "execve", "unshare_user",
]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_every_call_outside_the_allow_list_fails_with_eperm(
    mode: SandboxMode, tmp_path: Path
) -> None:
    probe = make_runner(_sandbox(mode), tmp_path)(SYSCALLS)
    assert probe.finished.confinement.seccomp is True
    answer = probe.answer
    assert answer["denied"] == dict.fromkeys(DENIED, errno.EPERM)
    assert answer["allowed"] == {
        "thread": "allowed",
        "socketpair_AF_UNIX": "allowed",
        "kill_self": "allowed",
        "prlimit_self": "allowed",
        "mmap": "allowed",
    }


SECRET = "admin-" + "s" * 30

SERVER = """
import json, os, sys
from pathlib import Path
from modelport.sandbox import Limits, Sandbox, SandboxMode
mode, scratch, log = SandboxMode(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
limits = Limits(wall_seconds=60, cpu_seconds=30, memory_bytes=1 << 30)
with log.open("wb") as output:
    finished = Sandbox(mode).run(
        ["probe.py", str(os.getpid())], scratch=scratch, limits=limits, output=output
    )
print(json.dumps({"returncode": finished.returncode}))
"""

READ_SERVER = """
import json, os, sys
server = int(sys.argv[1])
seen = {"parent_is_server": os.getppid() == server}
for pid in {server, os.getppid()}:
    for name in ("environ", "mem", "maps"):
        path = f"/proc/{pid}/{name}"
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
            seen[path] = data.decode(errors="replace")
        except OSError as exc:
            seen[path] = exc.errno
print(json.dumps(seen))
"""


def _serve_and_probe(tmp_path: Path) -> tuple[dict[str, Any], str]:
    """A server process started with the admin key in its environment (as a real one
    is) runs READ_SERVER in its unisolated sandbox, telling it its own pid; what the probe saw, and
    its whole output."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "probe.py").write_text(textwrap.dedent(READ_SERVER))
    log = tmp_path / "probe.log"
    done = subprocess.run(
        [sys.executable, "-c", SERVER, "unisolated", str(scratch), str(log)],
        env={**os.environ, "MODELPORT_ADMIN_KEY": SECRET},
        capture_output=True,
        timeout=120,
        check=True,
    )
    output = log.read_text(errors="replace")
    assert json.loads(done.stdout)["returncode"] == 0, output
    lines = [line for line in output.splitlines() if line.startswith("{")]
    assert lines, output
    return dict(json.loads(lines[-1])), output


def test_the_servers_environment_and_memory_are_out_of_reach_unisolated(
    tmp_path: Path,
) -> None:
    """Without namespaces the child sees the host's /proc, its parent the server in it;
    the server's entries are closed to it (under bubblewrap the server is not in the
    child's PID namespace at all: ``tests/sandbox/test_escape.py``)."""
    seen, output = _serve_and_probe(tmp_path)
    assert SECRET not in output
    assert seen["parent_is_server"] is True
    for name in ("environ", "mem", "maps"):
        reads = [value for path, value in seen.items() if path.endswith(f"/{name}")]
        assert reads and all(v in (errno.EACCES, errno.EPERM) for v in reads), seen


def test_filling_tmp_stops_at_its_size(tmp_path: Path) -> None:
    run = make_runner(_sandbox(SandboxMode.BUBBLEWRAP), tmp_path)
    probe = run(FILL.format(path="/tmp/fill"), limits=_limits(tmp_bytes=4 << 20))
    assert probe.answer["errno"] == errno.ENOSPC
    assert probe.answer["written"] <= 4 << 20


@pytest.mark.parametrize("mode", MODES)
def test_a_file_past_the_size_limit_cannot_be_written(mode: SandboxMode, tmp_path: Path) -> None:
    run = make_runner(_sandbox(mode), tmp_path)
    probe = run(FILL.format(path="big.bin"), limits=_limits(file_bytes=3 << 20))
    # The child lives on and says so: Python ignores SIGXFSZ, the write fails.
    assert probe.finished.returncode == 0
    assert probe.answer == {"errno": errno.EFBIG, "written": 3 << 20}
    assert (tmp_path / "scratch" / "big.bin").stat().st_size == 3 << 20


FILL = """
import json
written = 0
try:
    with open({path!r}, "wb", buffering=0) as f:
        while written < 64 << 20:
            written += f.write(b"x" * (1 << 20))
    print(json.dumps({{"errno": None, "written": written}}))
except OSError as exc:
    print(json.dumps({{"errno": exc.errno, "written": written}}))
"""


def _limits(**sizes: int) -> Limits:
    return Limits(
        wall_seconds=LIMITS.wall_seconds,
        cpu_seconds=LIMITS.cpu_seconds,
        memory_bytes=LIMITS.memory_bytes,
        **sizes,
    )


def _capped() -> Cgroups:
    """The cgroups this host gives the server (as it detects them at start-up)."""
    cgroups = build_cgroups("auto", None)
    if cgroups.enforcement is Enforcement.RLIMITS:
        pytest.skip(f"this host gives the server no cgroup it can write: {cgroups.reason}")
    return cgroups


def test_memory_past_the_cgroups_cap_gets_the_child_killed(tmp_path: Path) -> None:
    """Memory no address-space limit sees (its private /tmp, memory-backed) still counts
    in its cgroup: past the cap the kernel kills it, and says so."""
    if not isolation_available():
        skip_or_fail("the sandbox tests need bubblewrap (Debian: apt install bubblewrap)")
    sandbox = Sandbox(SandboxMode.BUBBLEWRAP, cgroups=_capped())
    limits = _limits(tmp_bytes=512 << 20)
    limits = Limits(**{**_fields(limits), "memory_bytes": 128 << 20})
    probe = make_runner(sandbox, tmp_path)(FILL_TMP, limits=limits)
    assert probe.finished.returncode == -signal.SIGKILL, probe.output
    assert probe.finished.memory_exceeded is True
    assert "wrote" not in probe.output  # it never got past the cap


FILL_TMP = """
written = 0
with open("/tmp/fill", "wb", buffering=0) as f:
    while written < 256 << 20:
        written += f.write(b"x" * (1 << 20))
print("wrote", written)
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_fork_bomb_stops_at_the_cgroups_process_cap(mode: SandboxMode, tmp_path: Path) -> None:
    """Without the system-call filter (which refuses fork outright), ``pids.max`` stops
    it: one fork past the cap fails with EAGAIN."""
    if mode is SandboxMode.BUBBLEWRAP and not isolation_available():
        skip_or_fail("the sandbox tests need bubblewrap (Debian: apt install bubblewrap)")
    sandbox = Sandbox(mode, seccomp=False, cgroups=_capped())
    probe = make_runner(sandbox, tmp_path)(BOMB, limits=_limits(processes=24))
    assert probe.finished.returncode == 0, probe.output
    assert probe.answer["errno"] == errno.EAGAIN
    assert 0 < probe.answer["made"] < 24


def test_a_fork_bomb_without_cgroups_stops_at_rlimit_nproc(tmp_path: Path) -> None:
    if os.getuid() == 0:
        pytest.skip(
            "the kernel never applies RLIMIT_NPROC to root (uid 0): there the system-call "
            "filter refuses fork (test_every_call_outside_the_allow_list_fails_with_eperm) "
            "and a cgroup's pids.max caps the rest"
        )
    sandbox = Sandbox(SandboxMode.UNISOLATED, seccomp=False)
    probe = make_runner(sandbox, tmp_path)(BOMB, limits=_limits(processes=24))
    assert probe.finished.confinement.enforcement is Enforcement.RLIMITS
    assert probe.answer["errno"] == errno.EAGAIN
    assert 0 < probe.answer["made"] < 24


BOMB = """
import json, os, signal
made, failed, children = 0, None, []
try:
    for _ in range(200):
        pid = os.fork()
        if pid == 0:
            signal.pause()
            os._exit(0)
        children.append(pid)
        made += 1
except OSError as exc:
    failed = exc.errno
for pid in children:
    os.kill(pid, signal.SIGKILL)
print(json.dumps({"made": made, "errno": failed}))
"""


def test_the_operators_tmp_and_file_sizes_take_effect(tmp_path: Path) -> None:
    if not isolation_available():
        skip_or_fail("the sandbox tests need bubblewrap (Debian: apt install bubblewrap)")
    settings = Settings(
        home=tmp_path / "home",
        sandbox="bubblewrap",
        sandbox_tmp_bytes=4 << 20,
        sandbox_file_bytes=6 << 20,
    )
    sandbox = build_sandbox(settings)
    limits = sandbox.limits(wall_seconds=60, cpu_seconds=30, memory_bytes=1 << 30)
    run = make_runner(sandbox, tmp_path)
    in_tmp = run(FILL.format(path="/tmp/fill"), limits=limits).answer
    assert in_tmp["errno"] == errno.ENOSPC
    assert in_tmp["written"] <= 4 << 20
    assert run(FILL.format(path="big.bin"), limits=limits).answer == {
        "errno": errno.EFBIG,
        "written": 6 << 20,
    }


def _fields(limits: Limits) -> dict[str, Any]:
    return {name: getattr(limits, name) for name in Limits.__dataclass_fields__}
