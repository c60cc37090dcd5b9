"""Catalog search benchmark: ranked full-text search with facets at 100,000 versions.

    .venv/bin/python bench/search_bench.py                          # SQLite, 20,000 x 5
    .venv/bin/python bench/search_bench.py --models 100000 --versions-per-model 1
    .venv/bin/python bench/search_bench.py --database-url postgresql+psycopg://u@host/db
    MODELPORT_BENCH_DATABASE_URL=postgresql+psycopg://u@host/db .venv/bin/python \\
        bench/search_bench.py                                       # SQLite, then PostgreSQL

A scratch database (SQLite file; with a PostgreSQL URL a temporary database beside the
named one, dropped at the end) is filled by ``catalog_bench.py``'s bulk inserts, then
indexed by the search migration's backfill (its time is printed); one model in ten is
priced and one in twenty has a verified score. Each query goes
through ``RegistryService.search`` as a tenant's member would (visibility filtered;
ranked page of 50, facets, total, suggestions when nothing matches), and its p50 and p95
are printed against a baseline measured in the same run: the catalog's former ``q``, a
case-insensitive ``LIKE`` scan of names and descriptions for one unranked page.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from catalog_bench import fill, fresh_database, owner_names
from sqlalchemy import insert, or_, select, text

from modelport.app import build_services
from modelport.config import Settings
from modelport.registry.service import RegistryService
from modelport.registry.types import CatalogQuery, CatalogViewer
from modelport.store import Database
from modelport.store.tables import EvaluationRow, ModelRow, PriceRuleRow

BUDGET_MS = 50.0
VIEWER = CatalogViewer(tenant="owner001")


def samples(fn: Callable[[], object], repeat: int) -> list[float]:
    fn()  # warm caches and statement compilation
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def like_page(registry: RegistryService, text: str) -> Callable[[], object]:
    """The baseline: the former ``q``, one page of a LIKE scan in id order."""

    def run() -> object:
        with registry.database.transaction() as session:
            return list(
                session.scalars(
                    select(ModelRow)
                    .where(
                        or_(
                            ModelRow.name.icontains(text, autoescape=True),
                            ModelRow.description.icontains(text, autoescape=True),
                        ),
                        or_(ModelRow.visibility == "public", ModelRow.owner == VIEWER.tenant),
                    )
                    .order_by(ModelRow.id)
                    .limit(51)
                )
            )

    return run


def price(database: Database, models: int) -> None:
    """Model-wide prices for one model in ten (the rest are free), so the price band facet
    reads a price book of a realistic size."""
    owners = owner_names(models)
    now = datetime.now(UTC)
    rows = [
        {
            "model": f"{owners[m % len(owners)]}/model-{m:06d}",
            "version": None,
            "unit": "prediction",
            "unit_price_micros": (m * 37) % 30_000,
            "per_units": 1,
            "revenue_share_bps": 8000,
            "effective_from": now,
            "created_at": now,
        }
        for m in range(0, models, 10)
    ]
    with database.transaction() as session:
        session.execute(insert(PriceRuleRow), rows)
        session.execute(text("ANALYZE"))


def score(database: Database, models: int) -> None:
    """A verified, published evaluation for one model in twenty (accuracy spread over
    0..1), so the score facet and ``min_score`` read an evaluations table of a realistic
    size."""
    owners = owner_names(models)
    now = datetime.now(UTC)
    rows = [
        {
            "id": f"e{m:08d}",
            "kind": "verified",
            "tenant": "owner001",
            "created_by": "bench",
            "model_owner": owners[m % len(owners)],
            "model_name": f"model-{m:06d}",
            "model_version": "1",
            "version_digest": "sha256:" + "0" * 64,
            "dataset_owner": "owner001",
            "dataset_name": "bench",
            "dataset_version": "1",
            "dataset_digest": "sha256:" + "1" * 64,
            "split": "test",
            "task": "classification",
            "output": "y",
            "published": True,
            "state": "succeeded",
            "metrics": {"accuracy": (m * 7 % 100) / 100},
            "score": (m * 7 % 100) / 100,
            "higher_is_better": True,
            "rows": 100,
            "latency_ms": 1.0,
            "created_at": now,
            "finished_at": now,
        }
        for m in range(0, models, 20)
    ]
    with database.transaction() as session:
        session.execute(insert(EvaluationRow), rows)
        session.execute(text("ANALYZE"))


def report(registry: RegistryService, args: argparse.Namespace) -> bool:
    def search(q: str, **filters: Any) -> Callable[[], object]:
        return lambda: registry.search(CatalogQuery(q=q, limit=50, viewer=VIEWER, **filters))

    name = f"model-{args.models // 2:06d}"
    first = registry.search(CatalogQuery(q=name, limit=1, viewer=VIEWER)).items
    assert first and first[0].name == name, "the exact name must rank first"
    baseline = samples(like_page(registry, "fraud"), args.repeat)
    base50 = statistics.median(baseline)
    cases: list[tuple[str, Callable[[], object]]] = [
        (f"exact name {name}", search(name)),
        ("fraud (1% of models)", search("fraud")),
        ("fraud detection (2 words)", search("fraud detection")),
        ("embedding (a task, 12%)", search("embedding")),
        ("tag7 (a tag, 7%)", search("tag7")),
        ("robust (common, 38%)", search("robust")),
        ("robu (prefix, 38%)", search("robu")),
        ("robust + task=embedding", search("robust", task="embedding")),
        ("fraud + price=free", search("fraud", price="free")),
        ("robust + price=high", search("robust", price="high")),
        ("robust + min_score=0.8", search("robust", min_score=0.8)),
        ("fraud + score=0.9-1", search("fraud", score="0.9-1")),
        ("fruad (typo: suggestions)", search("fruad")),
        ("no-such-text (none)", search("no-such-text")),
    ]
    print(f"baseline LIKE page, q=fraud:      p50 {base50:7.2f} ms  p95 {p95(baseline):7.2f} ms")
    print(f"{'query (ranked page + facets)':32} {'p50 ms':>8} {'p95 ms':>8} {'p50 x LIKE':>11}")
    within = True
    for label, fn in cases:
        timed = samples(fn, args.repeat)
        p50, tail = statistics.median(timed), p95(timed)
        within &= tail <= BUDGET_MS
        print(f"{label:32} {p50:8.2f} {tail:8.2f} {p50 / base50:11.2f}")
    print(f"every p95 under {BUDGET_MS:.0f} ms: {'yes' if within else 'NO'}")
    return within


def run(url: str | None, args: argparse.Namespace) -> bool:
    with tempfile.TemporaryDirectory() as tmp, fresh_database(url, Path(tmp)) as scratch:
        from modelport.store import upgrade

        upgrade(scratch)
        settings = Settings(home=Path(tmp) / "home", database_url=scratch, admin_key="b" * 32)
        services = build_services(settings)
        try:
            started = time.perf_counter()
            fill(services.database, args.models, args.versions_per_model, args.seed)
            price(services.database, args.models)
            score(services.database, args.models)
            fill_s = time.perf_counter() - started
            total = args.models * args.versions_per_model
            print(
                f"{services.database.dialect}: {args.models:,} models, {total:,} versions "
                f"inserted and indexed in {fill_s:.1f}s"
            )
            return report(services.registry, args)
        finally:
            services.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url",
        default=None,
        help="only this database (default: SQLite, then MODELPORT_BENCH_DATABASE_URL if set)",
    )
    parser.add_argument("--models", type=int, default=20_000)
    parser.add_argument("--versions-per-model", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=60, help="timed runs per query")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    urls = [args.database_url] if args.database_url else [None]
    if not args.database_url and os.environ.get("MODELPORT_BENCH_DATABASE_URL"):
        urls.append(os.environ["MODELPORT_BENCH_DATABASE_URL"])
    ok = all([run(url, args) for url in urls])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
