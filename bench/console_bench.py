"""Console page benchmark: the catalog and model pages with 100,000 versions, each
next to the API call it is built on, in the same run.

    .venv/bin/python bench/console_bench.py                      # SQLite, 20,000 x 5
    .venv/bin/python bench/console_bench.py --database-url postgresql+psycopg://u@host/db

Rows are seeded directly, by ``catalog_bench.py``'s bulk Core inserts. A tenant's member
signs in to the console with an API key; every request then goes through the whole
application in process (an ASGI client, no sockets): a console page is its own
routing, session lookup, in-process API calls with the signed-in key, and rendering.
Printed: p50 and p95 of each page, p95 of the API calls it shows made one after another
by the same key (for the model page: the model alone, then all six), and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from catalog_bench import fill, fresh_database, owner_names
from cryptography.fernet import Fernet

from modelport.api import create_app
from modelport.app import build_services
from modelport.config import Settings
from modelport.store import upgrade


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


async def measure(app: object, key: str, models: int, per_model: int, repeat: int) -> None:
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
            f"/api/models/{ref}/versions/{per_model}",
            f"/api/models/{ref}/versions/{per_model}/lineage",
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
            ("model page (its 6 calls)", f"/console/models/{ref}", model_calls),
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
            asyncio.run(
                measure(
                    create_app(services),
                    key.secret,
                    args.models,
                    args.versions_per_model,
                    args.repeat,
                )
            )
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
