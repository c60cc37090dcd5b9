"""Catalog query benchmark: a fresh database filled with N models and versions, then timed.

    .venv/bin/python bench/catalog_bench.py                      # SQLite, 20,000 x 5
    .venv/bin/python bench/catalog_bench.py --database-url postgresql+psycopg://u@host/db

With a PostgreSQL URL, a temporary database is created next to the one named in the
URL and dropped at the end; the named database is not touched.

Rows are bulk inserted (Core ``insert`` with many parameter sets). Each catalog query
goes through ``RegistryService.search`` (one transaction per call, as the API does)
and its median time is printed next to two baselines measured in the same run:
fetching one model by ``owner/name`` (a unique-index lookup) and the unfiltered
first page.
"""

from __future__ import annotations

import argparse
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import psycopg
from alembic import command
from sqlalchemy import insert, text
from sqlalchemy.engine import make_url

from modelport.app import build_services
from modelport.config import Settings
from modelport.registry.catalog import encode_cursor
from modelport.registry.service import RegistryService
from modelport.registry.types import CatalogQuery
from modelport.store import Database, upgrade
from modelport.store.migrate import alembic_config
from modelport.store.tables import (
    LifecycleEventRow,
    ModelRow,
    ModelTagRow,
    ModelVersionRow,
    VersionFileRow,
)

TASKS = ["classification", "regression", "embedding", "detection", "segmentation",
         "translation", "summarization", "speech"]  # fmt: skip
LICENSES = ["MIT", "Apache-2.0", "BSD-3-Clause", "CC-BY-4.0", "GPL-3.0-only"]
FORMATS = ["onnx"] * 8 + ["safetensors", "gguf"]
TAGS = [f"tag{i}" for i in range(30)]
WORDS = ["fast", "small", "large", "robust", "accurate", "tiny", "quantized", "distilled",
         "multilingual", "vision", "text", "audio", "payments", "retail", "medical", "legal",
         "finance"]  # fmt: skip
BATCH = 5000
SEARCH_INDEX_REVISION = "0026_catalog_search_fts"


def _manifest(fmt: str, digest: str, i: int) -> str:
    return orjson.dumps(
        {
            "schema_version": 1,
            "format": fmt,
            "files": [{"path": f"model.{fmt}", "digest": digest, "size": 1000 + i}],
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            "license": "MIT",
            "lineage": {"parents": [], "datasets": [], "code": []},
            "resources": {"max_batch_size": 8, "hardware": ["cpu"]},
            "examples": [],
            "runtime": {},
            "description": "",
            "tags": [],
        },
        option=orjson.OPT_SORT_KEYS,
    ).decode()


def owner_names(models: int) -> list[str]:
    return [f"owner{i:03d}" for i in range(max(1, models // 100))]


def _batches(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def fill(database: Database, models: int, per_model: int, seed: int) -> None:
    rng = random.Random(seed)
    now = datetime.now(UTC)
    owners = owner_names(models)
    with database.transaction() as session:
        model_rows = (
            {
                "id": m + 1,
                "owner": owners[m % len(owners)],
                "name": f"model-{m:06d}",
                "task": rng.choice(TASKS),
                "description": " ".join(rng.choices(WORDS, k=8))
                + (" fraud detection" if m % 100 == 7 else ""),
                "license": rng.choice(LICENSES),
                "visibility": "public",
                "created_at": now,
                "created_by": "bench",
            }
            for m in range(models)
        )
        for batch in _batches(model_rows):
            session.execute(insert(ModelRow), batch)
        tag_rows = (
            {"model_id": m + 1, "tag": tag} for m in range(models) for tag in rng.sample(TAGS, 2)
        )
        for batch in _batches(tag_rows):
            session.execute(insert(ModelTagRow), batch)
        model_format = {m + 1: rng.choice(FORMATS) for m in range(models)}
        version_rows = []
        for m in range(models):
            for v in range(per_model):
                vid = m * per_model + v + 1
                digest = "sha256:" + secrets.token_hex(32)
                fmt = model_format[m + 1]
                version_rows.append(
                    {
                        "id": vid,
                        "model_id": m + 1,
                        "version": str(v + 1),
                        "manifest_digest": "sha256:" + secrets.token_hex(32),
                        "manifest": _manifest(fmt, digest, vid),
                        "format": fmt,
                        "created_at": now,
                        "created_by": "bench",
                        "_digest": digest,
                    }
                )
        for batch in _batches(iter(version_rows)):
            session.execute(
                insert(ModelVersionRow),
                [{k: v for k, v in r.items() if k != "_digest"} for r in batch],
            )
            session.execute(
                insert(VersionFileRow),
                [
                    {"version_id": r["id"], "path": "model", "digest": r["_digest"], "size": 1}
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
            # Explicit ids were inserted: move the sequences past them.
            for table in ("models", "model_versions", "lifecycle_events"):
                session.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                        f"(SELECT max(id) FROM {table}))"
                    )
                )
    rebuild_search_index(database)


def rebuild_search_index(database: Database) -> None:
    """Index the bulk-inserted models for ``q``: the rows bypassed the registry, so run the
    search index's migration again, whose backfill indexes every model there is."""
    database.dispose()
    command.downgrade(alembic_config(database.url), SEARCH_INDEX_REVISION + "-1")
    upgrade(database.url)


def time_query(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm caches and statement compilation
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@contextmanager
def fresh_database(url: str | None, tmp: Path) -> Iterator[str]:
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


def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, fresh_database(args.database_url, Path(tmp)) as url:
        upgrade(url)
        settings = Settings(home=Path(tmp) / "home", database_url=url, admin_key="b" * 32)
        services = build_services(settings)
        try:
            started = time.perf_counter()
            fill(services.database, args.models, args.versions_per_model, args.seed)
            fill_s = time.perf_counter() - started
            total = args.models * args.versions_per_model
            print(
                f"{services.database.dialect}: {args.models:,} models, {total:,} versions "
                f"inserted in {fill_s:.1f}s"
            )
            report(services.registry, args)
        finally:
            services.close()


def report(registry: RegistryService, args: argparse.Namespace) -> None:
    def page(**filters: Any) -> Callable[[], object]:
        return lambda: registry.search(CatalogQuery(limit=50, **filters))

    middle = args.models // 2
    owners = owner_names(args.models)
    owner = owners[middle % len(owners)]
    by_key = time_query(lambda: registry.get_model(owner, f"model-{middle:06d}"), args.repeat)
    first = time_query(page(), args.repeat)
    deep = encode_cursor(args.models - 100)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("first page, no filter", page()),
        ("deep cursor page", page(cursor=deep)),
        ("owner=owner007", page(owner="owner007")),
        ("task=embedding", page(task="embedding")),
        ("license=MIT", page(license="MIT")),
        ("tag=tag7", page(tag="tag7")),
        ("format=onnx", page(format="onnx")),
        ("format=gguf (10%)", page(format="gguf")),
        ("q=fraud (1%)", page(q="fraud")),
        ("q=robust (common)", page(q="robust")),
        ("q=no-such-text (none)", page(q="no-such-text")),
        ("task+format+tag", page(task="embedding", format="onnx", tag="tag3")),
        ("task=embedding, deep", page(task="embedding", cursor=deep)),
    ]
    print(f"baseline get_model by owner/name: {by_key * 1000:8.3f} ms")
    print(f"baseline first page (50 models):  {first * 1000:8.3f} ms")
    print(f"{'query (limit 50)':28} {'median ms':>10} {'x get_model':>12} {'x first page':>13}")
    for label, fn in cases:
        median = time_query(fn, args.repeat)
        print(f"{label:28} {median * 1000:10.3f} {median / by_key:12.1f} {median / first:13.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    parser.add_argument("--models", type=int, default=20_000)
    parser.add_argument("--versions-per-model", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=25, help="timed runs per query")
    parser.add_argument("--seed", type=int, default=7)
    run(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
