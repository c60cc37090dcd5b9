"""What metering costs, measured in one run.

    .venv/bin/python bench/metering_bench.py
    .venv/bin/python bench/metering_bench.py --postgres-url postgresql+psycopg://u@host/db -n 5000

1. Ingestion: usage events recorded by the deduplicating ledger (the path of the
   outbox drainer and of ``POST /api/usage/events``), in batches of ``--batch`` of
   which ``--duplicates`` (default 20%) were already recorded, on SQLite and on
   PostgreSQL (a scratch database made on the server of ``--postgres-url`` and
   dropped after; skipped when it does not answer). Prints events offered per second
   and new events per second.
2. Latency: a real ``/v2`` infer call of a tiny ONNX model through the whole app
   (in-process ASGI, one call at a time, modes interleaved in rounds), on each
   database, with:

   - no metering: the same app with a metering hook that does nothing;
   - free version: metered, no price (no reservation; the usage event is written
     to the outbox before the answer);
   - priced: metered, a price and a prepaid balance (reserve before the work;
     settle, debit and write the outbox after it).

   Prints p50 and p99 in microseconds, what each adds to "no metering" at p50, and
   its p50 as a multiple of it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from asgi_calls import post
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.digests import sha256_digest
from modelport.metering.events import priced_event
from modelport.metering.ledger import Ledger
from modelport.metering.types import BalanceScope, NewPriceRule, PriceSnapshot, Unit, UsageStatus
from modelport.store import create_database, upgrade
from modelport.testing.onnx_models import add_one

ADMIN_KEY = "bench-admin-key-" + "x" * 24
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
BODY = b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}'


# ---- ingestion
def events(n: int) -> list[Any]:
    now = datetime.now(UTC)
    price = PriceSnapshot(rule_id=1, unit_price_micros=1_000, revenue_share_bps=7000)
    return [
        priced_event(
            event_id=uuid.uuid4().hex,
            price=price,
            unit=Unit.PREDICTION,
            quantity=1,
            status=UsageStatus.SUCCEEDED,
            tenant=f"t{i % 50}",
            key_id=None,
            model="acme/adder",
            version="1",
            manifest_digest="sha256:" + "ab" * 32,
            started_at=now,
            finished_at=now,
            source="bench",
            reservation_id="settled",  # charged at settlement: measure the ledger alone
        )
        for i in range(n)
    ]


def ingest(url: str, total: int, batch: int, duplicate_share: float) -> tuple[float, float]:
    """Events offered per second and new events per second."""
    database = create_database(url)
    ledger = Ledger(database)
    fresh = events(total)
    rng = random.Random(1)
    recorded: list[Any] = []
    offered = inserted = 0
    per_batch_new = max(1, round(batch * (1 - duplicate_share)))
    started = time.perf_counter()
    for start in range(0, total, per_batch_new):
        new = fresh[start : start + per_batch_new]
        dups = rng.sample(recorded, min(len(recorded), batch - len(new))) if recorded else []
        chunk = new + dups
        rng.shuffle(chunk)
        result = ledger.record(chunk)
        offered += len(chunk)
        inserted += len(result.inserted)
        recorded.extend(new)
    took = time.perf_counter() - started
    assert inserted == total and ledger.count() == total
    database.dispose()
    return offered / took, inserted / took


# ---- latency
class _Nothing:
    def record(self, **_: Any) -> None:
        pass

    def ran_version(self, *_: Any) -> None:
        pass


class _NoMeter:
    @asynccontextmanager
    async def metered(self, call: Any) -> AsyncIterator[_Nothing]:
        yield _Nothing()


class NoMetering:
    """Stands in for the metering service: the hook does nothing."""

    meter = _NoMeter()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def publish(client: TestClient, services: Services, model: str) -> None:
    data = add_one().SerializeToString()
    digest = sha256_digest(data)
    client.post("/api/uploads", params={"digest": digest}, content=data)
    owner, name = model.split("/")
    client.post("/api/models", json={"owner": owner, "name": name, "license": "MIT"})
    manifest = {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        "license": "MIT",
    }
    client.post(
        f"/api/models/{model}/versions", json={"version": "1", "manifest": manifest}
    ).raise_for_status()
    client.post(f"/v2/repository/models/{model}/load", json={}).raise_for_status()


async def measure(
    targets: dict[str, tuple[ASGIApp, str]], headers: list[tuple[bytes, bytes]], n: int, rounds: int
) -> dict[str, list[int]]:
    samples: dict[str, list[int]] = {name: [] for name in targets}
    for name, (app, path) in targets.items():  # warm up
        for _ in range(100):
            assert await post(app, path, headers, BODY) == 200, name
    per_round = max(1, n // rounds)
    for _ in range(rounds):
        for name, (app, path) in targets.items():
            times = samples[name]
            for _ in range(per_round):
                start = time.perf_counter_ns()
                status = await post(app, path, headers, BODY)
                times.append(time.perf_counter_ns() - start)
                if status != 200:
                    raise SystemExit(f"{name}: status {status}")
    return samples


def latency(home: Path, url: str, n: int, rounds: int) -> dict[str, list[int]]:
    settings = Settings(
        home=home,
        database_url=url,
        admin_key=ADMIN_KEY,
        auto_migrate=True,
        runtime_intra_op_threads=1,
    )
    services = build_services(settings)
    try:
        tenancy = services.tenancy
        tenancy.create_tenant("acme", actor="bench")
        tenancy.add_member("acme", "app", roles=["consumer", "publisher"], actor="bench")
        key = tenancy.create_key("acme", "app", name="bench", actor="bench").secret
        metering = services.metering
        metering.balances.credit(BalanceScope.TENANT, "acme", 10**15, tenant="acme")
        with TestClient(
            create_app(services), headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        ) as client:
            for model in ("acme/free", "acme/priced"):
                publish(client, services, model)
            metering.prices.add(
                NewPriceRule(model="acme/priced", unit=Unit.PREDICTION, unit_price_micros=1_000),
                actor="bench",
            )
            bare = create_app(dataclasses.replace(services, metering=NoMetering()))  # type: ignore[arg-type]
            full = create_app(services)
            targets: dict[str, tuple[ASGIApp, str]] = {
                "no metering": (bare, "/v2/models/acme/priced/infer"),  # type: ignore[dict-item]
                "metered, free version": (full, "/v2/models/acme/free/infer"),  # type: ignore[dict-item]
                "metered, priced (reserve+settle)": (full, "/v2/models/acme/priced/infer"),  # type: ignore[dict-item]
            }
            headers = [
                (b"authorization", f"Bearer {key}".encode()),
                (b"content-type", b"application/json"),
            ]
            samples = client.portal.call(measure, targets, headers, n, rounds)
            metering.deliver()
            charged = metering.balances.get(BalanceScope.TENANT, "acme")
            assert charged.reserved_micros == 0
            priced_calls = (10**15 - charged.balance_micros) // 1_000
            assert priced_calls == len(samples["metered, priced (reserve+settle)"]) + 100
        return samples
    finally:
        services.close()


def report(samples: dict[str, list[int]]) -> None:
    base = statistics.median(samples["no metering"]) / 1000
    print(f"  {'mode':<34} {'p50 µs':>9} {'p99 µs':>9} {'+p50 µs':>9} {'x none':>7}")
    for name, times in samples.items():
        ordered = sorted(times)
        p50 = statistics.median(ordered) / 1000
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] / 1000
        print(f"  {name:<34} {p50:9.1f} {p99:9.1f} {p50 - base:9.1f} {p50 / base:7.2f}")


# ---- databases
def scratch_postgres(base: str) -> tuple[str, Callable[[], None]] | None:
    url = make_url(base)
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    name = f"mp_bench_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=2) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as exc:
        print(f"(no PostgreSQL at {base}: {exc}; skipping it)", file=sys.stderr)
        return None

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return url.set(database=name).render_as_string(hide_password=False), drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=50_000, help="distinct events ingested")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--duplicates", type=float, default=0.2, help="share of each batch")
    parser.add_argument("-n", type=int, default=3_000, help="/v2 calls per mode")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "MODELPORT_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
        ),
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="modelport-bench-") as tmp:
        databases: list[tuple[str, str, Callable[[], None] | None]] = [
            ("SQLite", f"sqlite:///{Path(tmp) / 'ingest.db'}", None)
        ]
        if made := scratch_postgres(args.postgres_url):
            databases.append(("PostgreSQL", *made))
        try:
            print(
                f"ingestion: {args.events} distinct events in batches of {args.batch}, "
                f"{args.duplicates:.0%} of each batch duplicates"
            )
            for label, url, _ in databases:
                upgrade(url)
                offered, new = ingest(url, args.events, args.batch, args.duplicates)
                print(f"  {label:<11} {offered:10,.0f} events/s offered {new:10,.0f} new/s")
            for label, url, _ in databases:
                if label == "SQLite":
                    url = f"sqlite:///{Path(tmp) / 'serve.db'}"
                print(f"\n/v2 infer latency, {label} ({args.n} calls per mode, one at a time)")
                home = Path(tmp) / f"home-{label}"
                report(latency(home, url, args.n, args.rounds))
        finally:
            for _, _, drop in databases:
                if drop is not None:
                    drop()


if __name__ == "__main__":
    main()
