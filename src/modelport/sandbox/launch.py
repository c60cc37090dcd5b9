"""The first step of a sandboxed child, before anything of the work is imported:

``python -m modelport.sandbox.launch [--memory-bytes N] [--cpu-seconds S]
[--open-files F] [--file-bytes B] [--processes P] [--seccomp] -- TARGET ARGS...``

sets the resource limits, gives up every capability, loads the system-call filter when
asked, then runs TARGET (a module name, or the path of a ``.py`` file) as ``__main__``
with ``ARGS``. Everything the work does, imports included, runs under all three.
"""

from __future__ import annotations

import argparse
import resource
import runpy
import sys

from modelport.sandbox import privileges


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if "--" not in args:
        raise SystemExit("usage: launch [options] -- TARGET [ARGS...]")
    split = args.index("--")
    parser = argparse.ArgumentParser(prog="modelport.sandbox.launch")
    parser.add_argument("--memory-bytes", type=int, default=0)
    parser.add_argument("--cpu-seconds", type=int, default=0)
    parser.add_argument("--open-files", type=int, default=0)
    parser.add_argument("--file-bytes", type=int, default=0)
    parser.add_argument("--processes", type=int, default=0)
    parser.add_argument("--seccomp", action="store_true")
    options = parser.parse_args(args[:split])
    target, *rest = args[split + 1 :]
    _limit(resource.RLIMIT_CORE, 0)
    if options.memory_bytes:
        _limit(resource.RLIMIT_AS, options.memory_bytes)
    if options.cpu_seconds:
        # SIGXCPU at the limit (a cause the parent can name), SIGKILL a second later.
        cpu = options.cpu_seconds
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if options.open_files:
        _limit(resource.RLIMIT_NOFILE, options.open_files)
    if options.file_bytes:
        # Past it a write fails with EFBIG (Python ignores SIGXFSZ).
        _limit(resource.RLIMIT_FSIZE, options.file_bytes)
    if options.processes:
        # Counts every task of this user, threads included; enforced once the
        # capabilities are gone (root's CAP_SYS_RESOURCE would bypass it).
        _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        ceiling = options.processes if hard == resource.RLIM_INFINITY else hard
        _limit(resource.RLIMIT_NPROC, min(options.processes, ceiling))
    privileges.drop_capabilities()
    if options.seccomp:
        from modelport.sandbox import seccomp

        seccomp.install()
    sys.argv = [target, *rest]
    if target.endswith(".py"):
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
