"""Serving benchmark: modelport's /v2 infer against a minimal server and raw onnxruntime.

    .venv/bin/python bench/serving_bench.py                       # 10 s per point
    .venv/bin/python bench/serving_bench.py --duration 5 --concurrency 1,64
    .venv/bin/python bench/serving_bench.py --workers 2 --redis-url redis://127.0.0.1:6379/0
    .venv/bin/python bench/serving_bench.py --caller consumer   # across tenants

The model is an MLP, 64 float features -> two 1024-wide ReLU layers -> 4-class
softmax, built here with fixed weights. Load comes from ``wrk`` (one thread, the
given number of connections) posting the same single-row JSON infer request
for a fixed time, over loopback only. For each concurrency it measures:

- the minimal server (``bench/minimal_server.py``: same uvicorn + Starlette +
  onnxruntime stack, no platform, no batching);
- the minimal server with ``--hop``: the same, with ``session.run`` handed to one
  worker thread and back, the least that serving with no model code on the event
  loop costs;
- modelport with batching off (``MODELPORT_RUNTIME_MAX_BATCH_SIZE=1``);
- modelport with batching on (up to 64 rows), reporting the mean executed batch
  size from the server's ``/metrics``.

Both servers run as separate processes under the same uvicorn settings (uvloop,
httptools, no access log); the platform through ``modelport serve``. With
``--workers N`` the platform runs N worker processes (sharing the given Redis, as
``serve --workers`` requires), and a minimal server with N worker processes joins
the run as a second reference. The model is published through the platform's own
API (upload, model, version) and loaded through ``/v2/repository`` before the
clock starts, so no point includes a cold start. The platform is called with the
operator's admin key, or with ``--caller consumer`` as the marketplace's consumers
call it: with the key of another tenant than the model's, the model public and its
version approved (validated against a manifest example first). Two in-process references
close the report: raw ``session.run`` predictions per second at batch 1, and at
the best of a few batch sizes.

Needs ``wrk`` on the PATH (``apt-get install wrk``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import onnx
import onnxruntime as ort
import orjson
from onnx import TensorProto, helper, numpy_helper

from modelport.digests import sha256_digest

ADMIN_KEY = "bench-admin-key-" + "k" * 24
MODEL = "bench/mlp"
FEATURES = 64
HERE = Path(__file__).resolve().parent


def build_mlp(hidden: int = 1024, classes: int = 4, seed: int = 0) -> onnx.ModelProto:
    """features [-1, 64] FP32 -> probabilities [-1, 4] FP32 through two hidden layers."""
    rng = np.random.default_rng(seed)

    def weights(name: str, *shape: int) -> onnx.TensorProto:
        scale = 1.0 / np.sqrt(shape[0]) if len(shape) == 2 else 0.1
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name
        )

    nodes = [
        helper.make_node("Gemm", ["features", "w1", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["r1"]),
        helper.make_node("Gemm", ["r1", "w2", "b2"], ["h2"]),
        helper.make_node("Relu", ["h2"], ["r2"]),
        helper.make_node("Gemm", ["r2", "w3", "b3"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "bench_mlp",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, FEATURES])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, classes])],
        initializer=[
            weights("w1", FEATURES, hidden),
            weights("b1", hidden),
            weights("w2", hidden, hidden),
            weights("b2", hidden),
            weights("w3", hidden, classes),
            weights("b3", classes),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def request_body(row: np.ndarray) -> bytes:
    return orjson.dumps(
        {"inputs": [{"name": "features", "datatype": "FP32", "shape": [1, FEATURES], "data": row}]},
        option=orjson.OPT_SERIALIZE_NUMPY,
    )


# ---- servers
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v2/health/ready", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server at {url} did not become ready")


@contextmanager
def process(command: list[str], env: dict[str, str], url: str) -> Iterator[None]:
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        wait_ready(url)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def publish(url: str, data: bytes, *, consumer: bool = False) -> str:
    """Upload the model, create it, publish version 1 and load it, all through the API.
    Answers the key to call it with: the admin key, or with ``consumer`` a key of another
    tenant, the model public and version 1 approved."""
    auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
    digest = sha256_digest(data)
    with httpx.Client(base_url=url, headers=auth, timeout=120) as http:
        http.post("/api/uploads", params={"digest": digest}, content=data).raise_for_status()
        owner, name = MODEL.split("/")
        visibility = "public" if consumer else "private"
        model = {"owner": owner, "name": name, "license": "MIT", "visibility": visibility}
        http.post("/api/tenants", json={"slug": owner})  # models live in a tenant's namespace
        http.post("/api/models", json=model)
        manifest = {
            "format": "onnx",
            "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
            "inputs": [{"name": "features", "datatype": "FP32", "shape": [-1, FEATURES]}],
            "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 4]}],
            "license": "MIT",
            "resources": {"max_batch_size": 64},
            "examples": [example(data)],
        }
        response = http.post(
            f"/api/models/{MODEL}/versions", json={"version": "1", "manifest": manifest}
        )
        if response.status_code not in (200, 201):
            raise RuntimeError(f"publish failed: {response.status_code} {response.text}")
        http.post(f"/v2/repository/models/{MODEL}/load").raise_for_status()
        if not consumer:
            return ADMIN_KEY
        for state in ("validated", "approved"):  # other tenants call approved versions only
            path = f"/api/models/{MODEL}/versions/1/transitions"
            http.post(path, json={"to": state}).raise_for_status()
        http.post("/api/tenants", json={"slug": "globex", "owner": "app"}).raise_for_status()
        issued = http.post("/api/keys", json={"tenant": "globex", "member": "app", "name": "b"})
        issued.raise_for_status()
        return str(issued.json()["key"])


def example(model: bytes) -> dict[str, object]:
    """One row and the model's answer to it, as a manifest example."""
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    row = np.ones((1, FEATURES), np.float32)
    (out,) = session.run(None, {"features": row})

    def tensor(name: str, array: np.ndarray) -> dict[str, object]:
        shape = list(array.shape)
        return {"name": name, "datatype": "FP32", "shape": shape, "data": array.ravel().tolist()}

    return {"inputs": [tensor("features", row)], "outputs": [tensor("probabilities", out)]}


def batch_stats(url: str) -> tuple[float, float]:
    """(sum, count) of the executed batch sizes histogram."""
    text = httpx.get(
        url + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=10
    ).text
    values = {}
    for kind in ("sum", "count"):
        match = re.search(rf"^modelport_inference_batch_size_{kind}{{[^}}]*}} (\S+)$", text, re.M)
        values[kind] = float(match.group(1)) if match else 0.0
    return values["sum"], values["count"]


# ---- load generation
LUA = """
wrk.method = "POST"
wrk.body = io.open("{body}", "rb"):read("*a")
wrk.headers["Content-Type"] = "application/json"
{auth}
"""


@dataclass(frozen=True)
class Point:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


def run_wrk(url: str, path: str, connections: int, seconds: int, script: Path) -> Point:
    out = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            url + path,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    latency = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+\w+)", out, re.M))
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    errors += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    return Point(rps, _ms(latency["50"]), _ms(latency["99"]), errors)


def _ms(value: str) -> float:
    number, unit = re.match(r"([\d.]+)(\w+)", value).groups()  # type: ignore[union-attr]
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


# ---- in-process references
def raw_onnxruntime(model: bytes, seconds: float) -> tuple[float, float, int]:
    """Predictions per second at batch 1 and at the best batch size, and that size."""
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    best, best_size, at_one = 0.0, 1, 0.0
    for size in (1, 8, 16, 32, 64, 128):
        x = rng.standard_normal((size, FEATURES)).astype(np.float32)
        session.run(None, {"features": x})
        runs, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds:
            session.run(None, {"features": x})
            runs += 1
        rate = runs * size / elapsed
        if size == 1:
            at_one = rate
        if rate > best:
            best, best_size = rate, size
    return at_one, best, best_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per point")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="MODELPORT_X=VALUE",
        help="extra setting for both platform servers (repeatable)",
    )
    parser.add_argument("--workers", type=int, default=1, help="platform worker processes")
    parser.add_argument("--redis-url", help="Redis for the platform's workers (--workers > 1)")
    parser.add_argument(
        "--caller",
        choices=("admin", "consumer"),
        default="admin",
        help="call the platform with the admin key, or as another tenant's consumer",
    )
    args = parser.parse_args()
    if args.workers > 1 and not args.redis_url:
        sys.exit("--workers above 1 needs --redis-url (modelport serve --workers requires Redis)")
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: install it (apt-get install wrk) and run again")
    levels = [int(c) for c in args.concurrency.split(",")]

    model = build_mlp().SerializeToString()
    row = np.random.default_rng(0).standard_normal(FEATURES).astype(np.float32)
    results: dict[tuple[str, int], Point] = {}
    mean_batch: dict[int, float] = {}
    extra_env = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory(prefix="serving-bench-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        (work / "mlp.onnx").write_bytes(model)
        (work / "body.json").write_bytes(request_body(row))
        plain = work / "plain.lua"
        plain.write_text(LUA.format(body=work / "body.json", auth=""))
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}

        # All three servers stay up; each concurrency level runs them back to back, so
        # drift in the machine's load affects them alike.
        servers: dict[str, tuple[str, str, Path]] = {}
        streams: list[str] = []
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        minimal = [
            sys.executable,
            str(HERE / "minimal_server.py"),
            "--model",
            str(work / "mlp.onnx"),
        ]
        stack.enter_context(process([*minimal, "--port", str(port)], base_env, url))
        servers["minimal"] = (url, "/v2/models/mlp/infer", plain)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        stack.enter_context(process([*minimal, "--port", str(port), "--hop"], base_env, url))
        servers["minimal, hop"] = (url, "/v2/models/mlp/infer", plain)
        if args.workers > 1:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            command = [*minimal, "--port", str(port), "--workers", str(args.workers)]
            stack.enter_context(process(command, base_env, url))
            servers[f"minimal x{args.workers}"] = (url, "/v2/models/mlp/infer", plain)
        for label, max_batch in (("batching off", 1), ("batching on", 64)):
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            env = {
                **base_env,
                "MODELPORT_HOME": str(work / label.replace(" ", "-")),
                "MODELPORT_ADMIN_KEY": ADMIN_KEY,
                "MODELPORT_RUNTIME_MAX_BATCH_SIZE": str(max_batch),
                "MODELPORT_WORKERS": str(args.workers),
                **extra_env,
            }
            if args.redis_url:
                streams.append(f"bench-{uuid.uuid4().hex}")  # in the home's keyspace
                env["MODELPORT_REDIS_URL"] = args.redis_url
                env["MODELPORT_METERING_STREAM"] = streams[-1]
            command = [
                *(sys.executable, "-m", "modelport.cli", "serve"),
                *("--port", str(port), "--log-level", "warning"),
            ]
            stack.enter_context(process(command, env, url))
            key = publish(url, model, consumer=args.caller == "consumer")
            script = work / f"{label.replace(' ', '-')}.lua"
            auth = f'wrk.headers["Authorization"] = "Bearer {key}"'
            script.write_text(LUA.format(body=work / "body.json", auth=auth))
            servers[label] = (url, f"/v2/models/{MODEL}/versions/1/infer", script)
        for url, path, script in servers.values():
            run_wrk(url, path, 4, 2, script)  # warm up

        for c in levels:
            for label, (url, path, script) in servers.items():
                before = batch_stats(url) if label == "batching on" else (0.0, 0.0)
                results[(label, c)] = run_wrk(url, path, c, args.duration, script)
                if label == "batching on":
                    after = batch_stats(url)
                    batches = after[1] - before[1]
                    mean_batch[c] = (after[0] - before[0]) / batches if batches else 0.0
                print(f"{label:<14} c={c:<3} {results[(label, c)]}", flush=True)

    if streams:
        import redis

        client = redis.Redis.from_url(args.redis_url)
        for stream in streams:
            client.delete(*client.scan_iter(f"modelport:*:{stream}"), stream)
        client.close()
    at_one, best, best_size = raw_onnxruntime(model, min(args.duration, 5))
    print()
    many = f"minimal x{args.workers}"
    extra = f" vs {many} |" if many in servers else ""
    print(
        "| server | concurrency | req/s | p50 ms | p99 ms | errors | mean batch | vs minimal |"
        + extra
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if extra else ""))
    for c in levels:
        reference = results[("minimal", c)].rps
        for label in servers:
            point = results[(label, c)]
            batch = f"{mean_batch[c]:.1f}" if label == "batching on" else "1"
            ratio = f" {point.rps / results[(many, c)].rps:.2f}x |" if extra else ""
            print(
                f"| {label} | {c} | {point.rps:.0f} | {point.p50_ms:.2f} | {point.p99_ms:.2f} "
                f"| {point.errors} | {batch} | {point.rps / reference:.2f}x |" + ratio
            )
    print()
    print(
        f"raw onnxruntime, in process: {at_one:.0f} predictions/s at batch 1, "
        f"{best:.0f} at batch {best_size}"
    )


if __name__ == "__main__":
    main()
