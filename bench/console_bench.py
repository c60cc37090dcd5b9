"""Console page benchmark: the catalog and model pages with 100,000 versions, each
next to the API call it is built on, in the same run.

    .venv/bin/python bench/console_bench.py                      # SQLite, 20,000 x 5
    .venv/bin/python bench/console_bench.py --database-url postgresql+psycopg://u@host/db

Rows are seeded directly (bulk Core inserts, as ``catalog_bench.py`` does). A tenant's member
signs in to the console with an API key; every request then goes through the whole
application in process (an ASGI client, no sockets): a console page is its own
routing, session lookup, in-process API calls with the signed-in key, and rendering.
Printed: p50 and p95 of each page, p95 of the API calls it shows made one after another
by the same key (for the model page: the model alone, then all five), and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import orjson
import psycopg
from cryptography.fernet import Fernet
from sqlalchemy import insert, text
from sqlalchemy.engine import make_url

from modelport.api import create_app
from modelport.app import build_services
from modelport.config import Settings
from modelport.store import Database, upgrade
from modelport.store.tables import (
    LifecycleEventRow,
    ModelRow,
    ModelTagRow,
    ModelVersionRow,
    VersionFileRow,
)

TASKS = ["classification", "regression", "embedding", "detection"]
FORMATS = ["onnx"] * 8 + ["safetensors", "gguf"]
TAGS = [f"tag{i}" for i in range(30)]
WORDS = ["fast", "small", "robust", "tiny", "vision", "text", "audio", "retail", "legal"]
BATCH = 5000


def owner_names(models: int) -> list[str]:
    return [f"owner{i:03d}" for i in range(max(1, models // 100))]


def _manifest(fmt: str, digest: str) -> str:
    return orjson.dumps(
        {
            "schema_version": 1,
            "format": fmt,
            "files": [{"path": f"model.{fmt}", "digest": digest, "size": 1000}],
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            "license": "MIT",
            "description": "A **bench** model.",
        }
    ).decode()


def fill(database: Database, models: int, per_model: int, seed: int) -> None:
    """``models`` public models of ``per_model`` versions each, a 1% with "fraud" in
    their description, two tags each."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    owners = owner_names(models)
    with database.transaction() as session:
        rows = [
            {
                "id": m + 1,
                "owner": owners[m % len(owners)],
                "name": f"model-{m:06d}",
                "task": rng.choice(TASKS),
                "description": " ".join(rng.choices(WORDS, k=8))
                + (" fraud detection" if m % 100 == 7 else ""),
                "license": "MIT",
                "visibility": "public",
                "created_at": now,
                "created_by": "bench",
            }
            for m in range(models)
        ]
        for start in range(0, len(rows), BATCH):
            session.execute(insert(ModelRow), rows[start : start + BATCH])
        tags = [{"model_id": m + 1, "tag": t} for m in range(models) for t in rng.sample(TAGS, 2)]
        for start in range(0, len(tags), BATCH):
            session.execute(insert(ModelTagRow), tags[start : start + BATCH])
        versions = []
        for m in range(models):
            fmt = rng.choice(FORMATS)
            for v in range(per_model):
                digest = "sha256:" + secrets.token_hex(32)
                versions.append(
                    {
                        "id": m * per_model + v + 1,
                        "model_id": m + 1,
                        "version": str(v + 1),
                        "manifest_digest": "sha256:" + secrets.token_hex(32),
                        "manifest": _manifest(fmt, digest),
                        "format": fmt,
                        "created_at": now,
                        "created_by": "bench",
                        "digest": digest,
                    }
                )
        for start in range(0, len(versions), BATCH):
            batch = versions[start : start + BATCH]
            session.execute(
                insert(ModelVersionRow),
                [{k: v for k, v in r.items() if k != "digest"} for r in batch],
            )
            session.execute(
                insert(VersionFileRow),
                [
                    {"version_id": r["id"], "path": "model", "digest": r["digest"], "size": 1}
                    for r in batch
                ],
            )
            session.execute(
                insert(LifecycleEventRow),
                [
                    {
                        "version_id": r["id"],
                        "from_state": None,
                        "to_state": "candidate",
                        "actor": "bench",
                        "reason": "",
                        "created_at": now,
                    }
                    for r in batch
                ],
            )
    with database.transaction() as session:
        session.execute(text("ANALYZE"))
        if database.dialect == "postgresql":
            for table in ("models", "model_versions", "lifecycle_events"):
                session.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))"
                    )
                )


@contextmanager
def fresh_database(url: str | None, tmp: Path) -> Iterator[str]:
    """A temporary database: a SQLite file, or one created next to ``url`` and dropped."""
    if url is None or url.startswith("sqlite"):
        yield url or f"sqlite:///{tmp / 'bench.db'}"
        return
    parsed = make_url(url)
    name = f"mp_bench_{secrets.token_hex(4)}"
    admin = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield parsed.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


async def timed(call: Callable[[], Awaitable[httpx.Response]], repeat: int) -> list[float]:
    for _ in range(3):  # warm caches and statement compilation
        response = await call()
        assert response.status_code == 200, (response.status_code, response.text[:300])
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = await call()
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200
    return samples


async def measure(app: object, key: str, models: int, repeat: int) -> None:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://bench") as browser,
        httpx.AsyncClient(
            transport=transport,
            base_url="http://bench",
            headers={"Authorization": f"Bearer {key}"},
        ) as api,
    ):
        form = await browser.get("/console/sign-in")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token
        signed = await browser.post(
            "/console/sign-in", data={"csrf_token": token[1], "api_key": key}
        )
        assert signed.status_code == 303, signed.text[:300]
        middle = models // 2
        owners = owner_names(models)
        ref = f"{owners[middle % len(owners)]}/model-{middle:06d}"
        model_calls = [
            f"/api/models/{ref}",
            f"/api/models/{ref}/versions",
            f"/api/models/{ref}/aliases",
            f"/api/prices?model={ref}",
            f"/api/models/{ref}/versions/5",
        ]
        cases: list[tuple[str, str, list[str]]] = [
            ("catalog, first page", "/console/models", ["/api/models?limit=24"]),
            ("catalog, q=fraud", "/console/models?q=fraud", ["/api/models?q=fraud&limit=24"]),
            (
                "catalog, task+format+tag",
                "/console/models?task=embedding&format=onnx&tag=tag3",
                ["/api/models?task=embedding&format=onnx&tag=tag3&limit=24"],
            ),
            ("model page", f"/console/models/{ref}", model_calls[:1]),
            ("model page (its 5 calls)", f"/console/models/{ref}", model_calls),
        ]

        async def calls(paths: list[str]) -> httpx.Response:
            for path in paths:
                response = await api.get(path)
                if response.status_code != 200:
                    break
            return response

        print(f"{'page':28} {'p50 ms':>8} {'p95 ms':>8} {'API p95':>8} {'x API':>6}")
        for label, page, paths in cases:
            page_ms = percentiles(await timed(lambda p=page: browser.get(p), repeat))
            api_ms = percentiles(await timed(lambda c=paths: calls(c), repeat))
            print(
                f"{label:28} {page_ms[0] * 1000:8.2f} {page_ms[1] * 1000:8.2f} "
                f"{api_ms[1] * 1000:8.2f} {page_ms[1] / api_ms[1]:6.1f}"
            )


def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, fresh_database(args.database_url, Path(tmp)) as url:
        upgrade(url)
        # Sessions seal the signed-in key: a distributed installation needs a secret key.
        settings = Settings(
            home=Path(tmp) / "home",
            database_url=url,
            admin_key="b" * 32,
            secret_key=Fernet.generate_key().decode(),
        )
        services = build_services(settings)
        try:
            fill(services.database, args.models, args.versions_per_model, args.seed)
            total = args.models * args.versions_per_model
            print(f"{services.database.dialect}: {args.models:,} models, {total:,} versions")
            services.tenancy.create_tenant("reader", actor="bench")
            services.tenancy.add_member("reader", "ann", roles=["consumer"], actor="bench")
            key = services.tenancy.create_key("reader", "ann", name="bench", actor="bench")
            asyncio.run(measure(create_app(services), key.secret, args.models, args.repeat))
        finally:
            services.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    parser.add_argument("--models", type=int, default=20_000)
    parser.add_argument("--versions-per-model", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=100, help="timed requests per case")
    parser.add_argument("--seed", type=int, default=7)
    run(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
