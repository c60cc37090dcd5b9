"""Upload benchmark: ``modelport push`` of one big file to a local server vs a plain copy.

Creates a file of ``--size`` bytes in a temporary folder, times ``shutil.copyfile`` of it
as the baseline, then starts ``modelport serve`` (temporary home, generated admin key,
loopback port) and times ``modelport push`` of a package holding the file, both as
subprocesses whose peak resident memory is sampled. Prints MB/s of both, their ratio
and the peak RSS of the server and of the CLI. Not a test: it asserts nothing.

    python bench/upload_bench.py --size 256MiB
    python bench/upload_bench.py               # 2 GiB
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from modelport.client.transfer import parse_size
from modelport.tenancy.admin import generate_admin_key

MB = 1_000_000
BLOCK = 1 << 20


class PeakRss:
    """Samples a process's resident memory in a background thread; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.process = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
            except psutil.NoSuchProcess:
                return
            time.sleep(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def make_file(path: Path, size: int) -> None:
    """Incompressible bytes where every MiB differs (nothing to deduplicate)."""
    block = bytearray(os.urandom(BLOCK))
    with path.open("wb") as out:
        written = 0
        index = 0
        while written < size:
            block[:8] = index.to_bytes(8, "little")
            n = min(BLOCK, size - written)
            out.write(block[:n])
            written += n
            index += 1


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, server: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("modelport serve exited during start")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError("modelport serve did not become ready")


def time_copy(source: Path, work: Path) -> float:
    target = work / "copy.bin"
    started = time.perf_counter()
    shutil.copyfile(source, target)
    elapsed = time.perf_counter() - started
    target.unlink()
    return elapsed


def run(size: int, chunk_size: str, work: Path) -> dict[str, float]:
    package = work / "package"
    package.mkdir()
    source = package / "weights.bin"
    make_file(source, size)
    manifest = {
        "format": "custom",
        "license": "MIT",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}],
    }
    (package / "manifest.json").write_text(json.dumps(manifest))
    copy_seconds = time_copy(source, work)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    key = generate_admin_key()
    env = {
        **os.environ,
        "MODELPORT_HOME": str(work / "home"),
        "MODELPORT_ADMIN_KEY": key,
        "XDG_CACHE_HOME": str(work / "cache"),
    }
    env.pop("MODELPORT_DATABASE_URL", None)
    env.pop("MODELPORT_BLOB_URL", None)
    command = [sys.executable, "-m", "modelport.cli"]
    serve = [*command, "serve", "--port", str(port), "--log-level", "warning"]
    server = subprocess.Popen(serve, env=env)
    try:
        wait_ready(url, server)
        # Models are published into a tenant's namespace.
        auth = {"Authorization": f"Bearer {key}"}
        httpx.post(f"{url}/api/tenants", json={"slug": "bench"}, headers=auth).raise_for_status()
        server_idle = psutil.Process(server.pid).memory_info().rss
        server_rss = PeakRss(server.pid)
        push = [
            *command, "--url", url, "--api-key", key, "push", str(package),
            "--model", "bench/upload", "--version", "1", "--chunk-size", chunk_size, "--json",
        ]  # fmt: skip
        started = time.perf_counter()
        client = subprocess.Popen(push, env=env, stdout=subprocess.PIPE)
        client_rss = PeakRss(client.pid)
        output, _ = client.communicate()
        push_seconds = time.perf_counter() - started
        client_peak = client_rss.stop()
        server_peak = server_rss.stop()
        if client.returncode != 0:
            raise RuntimeError(f"modelport push failed with exit code {client.returncode}")
        digest = json.loads(output)["manifest"]["files"][0]["digest"]
        stored = httpx.head(f"{url}/api/blobs/{digest}", headers={"Authorization": f"Bearer {key}"})
        assert int(stored.headers["content-length"]) == size, "the blob was not stored whole"
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {
        "size_bytes": size,
        "copy_mb_s": size / MB / copy_seconds,
        "push_mb_s": size / MB / push_seconds,
        "push_seconds": push_seconds,
        "copy_seconds": copy_seconds,
        "server_idle_rss_mb": server_idle / MB,
        "server_peak_rss_mb": server_peak / MB,
        "cli_peak_rss_mb": client_peak / MB,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="2GiB", help="file size, e.g. 256MiB (default 2GiB)")
    parser.add_argument("--chunk-size", default="16MiB", help="push chunk size (default 16MiB)")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the temp folder")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    size = parse_size(args.size)
    with tempfile.TemporaryDirectory(prefix="modelport-bench-", dir=args.dir) as work:
        results = run(size, args.chunk_size, Path(work))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"file size        {size / (1 << 20):,.0f} MiB")
    print(f"copy             {results['copy_mb_s']:8.1f} MB/s  ({results['copy_seconds']:.2f} s)")
    print(f"push             {results['push_mb_s']:8.1f} MB/s  ({results['push_seconds']:.2f} s)")
    print(f"copy/push ratio  {results['copy_mb_s'] / results['push_mb_s']:8.2f}")
    print(f"server RSS       {results['server_idle_rss_mb']:8.1f} MB idle, ", end="")
    print(f"{results['server_peak_rss_mb']:.1f} MB peak")
    print(f"CLI peak RSS     {results['cli_peak_rss_mb']:8.1f} MB")


if __name__ == "__main__":
    main()
