"""A streamed call through the service, from a toy generative engine to the ledger, on
SQLite and PostgreSQL: chunks in order, a consumer that leaves cancels the engine's
work and pays for what was delivered, the deadline cuts the stream, and a hold that
does not fit refuses the call before anything runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from modelport.errors import (
    DeadlineExceeded,
    InvalidInput,
    Overloaded,
    PaymentRequired,
    Unavailable,
    Unprocessable,
)
from modelport.inference.streaming import (
    CallStream,
    GenerateRequest,
    StreamingCalls,
    StreamTarget,
)
from modelport.inference.types import Caller
from modelport.manifest import Manifest, manifest_digest
from modelport.metering.balances import BalanceRepository
from modelport.metering.journal import UsageJournal
from modelport.metering.ledger import Ledger
from modelport.metering.meter import InferenceMeter
from modelport.metering.outbox import LedgerSink, Outbox
from modelport.metering.prices import PriceBook
from modelport.metering.reservations import Reservations
from modelport.metering.types import (
    BalanceScope,
    FailureRule,
    NewPriceRule,
    Unit,
    UsageEvent,
    UsageStatus,
)
from modelport.runtime.cache import ModelCache
from modelport.runtime.engines import GenerativeHost
from modelport.runtime.formats.registry import FormatRegistry
from modelport.runtime.host import MemoryBudget, ModelHost
from modelport.serving.backends.local import LocalBackend
from modelport.serving.types import VersionRef
from modelport.store import Database, create_database
from modelport.tenancy import Principal
from modelport.tenancy.limits import LimitService, ScopeType
from modelport.tenancy.limits.budgets import BudgetRepository
from modelport.tenancy.limits.inprocess import (
    InProcessConcurrencyLimiter,
    InProcessRateLimiter,
)
from modelport.tenancy.limits.repository import LimitRepository
from modelport.testing.toy_engine import TOY_FORMAT, ToyEngine, ToyGenerativeFormat
from tests.metering.conftest import Clock
from tests.runtime.conftest import DictBlobSource

IN_PRICE, OUT_PRICE = 10, 100
"""Micros per input token and per output token of acme/writer."""
PROMPT = "the quick brown fox jumps over the lazy dog"
CONSUMER = Principal(id="u1", roles=frozenset({"member"}), tenant="beta", key_id="k1")


@dataclass
class Rig:
    """The streaming service over a local backend hosting a toy engine, metered on one
    database."""

    calls: StreamingCalls
    engine: ToyEngine
    target: StreamTarget
    meter: InferenceMeter
    prices: PriceBook
    balances: BalanceRepository
    reservations: Reservations
    outbox: Outbox
    ledger: Ledger
    limits: LimitService

    def ledger_events(self) -> dict[Unit, UsageEvent]:
        self.outbox.drain(LedgerSink(self.ledger))
        return {entry.event.unit: entry.event for entry in self.ledger.entries()}

    def balance(self) -> tuple[int, int]:
        """beta's prepaid balance and what is held on it."""
        balance = self.balances.get(BalanceScope.TENANT, "beta")
        return balance.balance_micros, balance.reserved_micros

    def price(self, failure_rule: FailureRule = FailureRule.NONE, failure_bps: int = 0) -> None:
        for unit, micros in ((Unit.INPUT_TOKEN, IN_PRICE), (Unit.OUTPUT_TOKEN, OUT_PRICE)):
            rule = NewPriceRule(
                model="acme/writer",
                unit=unit,
                unit_price_micros=micros,
                failure_rule=failure_rule,
                failure_bps=failure_bps,
            )
            self.prices.add(rule, actor="t")


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = create_database(database_url)
    yield db
    db.dispose()


@pytest.fixture
def rig(database: Database, tmp_path: Path) -> Iterator[Rig]:
    clock = Clock()
    prices = PriceBook(database, default_revenue_share_bps=7000, cache_ttl_seconds=0, now=clock)
    outbox = Outbox(database, lease_seconds=30, now=clock)
    reservations = Reservations(database, outbox, now=clock)
    meter = InferenceMeter(prices, reservations, grace_seconds=60, now=clock)
    source = DictBlobSource()
    engine = ToyEngine(delay=0.005)
    cache = ModelCache(tmp_path / "cache")
    host = ModelHost(cache=cache, formats=FormatRegistry(), budget=MemoryBudget(host_bytes=None))
    engines = GenerativeHost(cache=cache, formats={TOY_FORMAT: ToyGenerativeFormat(engine)})
    limits = LimitService(
        limits=LimitRepository(database),
        budgets=BudgetRepository(database),
        rates=InProcessRateLimiter(),
        slots=InProcessConcurrencyLimiter(),
        cache_ttl_seconds=0,
    )
    backend = LocalBackend(host, source, engines=engines)
    manifest = toy_manifest(source)
    version = VersionRef("acme/writer", "1", manifest_digest(manifest), manifest)
    yield Rig(
        calls=StreamingCalls(backend=backend, meter=meter, limits=limits),
        engine=engine,
        target=StreamTarget(version, task="text-generation"),
        meter=meter,
        prices=prices,
        balances=BalanceRepository(database, now=clock),
        reservations=reservations,
        outbox=outbox,
        ledger=Ledger(database, now=clock),
        limits=limits,
    )
    engines.close()
    host.close()


def toy_manifest(source: DictBlobSource, **runtime: Any) -> Manifest:
    data = b"toy weights"
    return Manifest.model_validate(
        {
            "format": TOY_FORMAT,
            "files": [{"path": "weights.bin", "digest": source.add(data), "size": len(data)}],
            "inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "text", "datatype": "BYTES", "shape": [1]}],
            "license": "MIT",
            "runtime": runtime,
        }
    )


async def open_stream(
    rig: Rig, prompt: str = PROMPT, max_tokens: int = 32, timeout: float = 10.0, rid: str = "r1"
) -> CallStream:
    request = GenerateRequest(prompt=prompt, max_tokens=max_tokens, request_id=rid)
    return await rig.calls.stream(Caller(CONSUMER), rig.target, request, time.monotonic() + timeout)


def test_chunks_arrive_in_order_and_the_usage_reaches_the_ledger(rig: Rig) -> None:
    rig.price()
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")

    async def scenario() -> tuple[list[str], list[str | None], CallStream]:
        stream = await open_stream(rig)
        texts, reasons = [], []
        async with stream:
            async for chunk in stream:
                texts.append(chunk.text)
                reasons.append(chunk.finish_reason)
        return texts, reasons, stream

    texts, reasons, stream = asyncio.run(scenario())
    assert "".join(texts) == PROMPT
    assert len(texts) == 9 and reasons[-1] == "stop" and set(reasons[:-1]) == {None}
    assert stream.status is UsageStatus.SUCCEEDED
    assert stream.usage == {Unit.INPUT_TOKEN: 9, Unit.OUTPUT_TOKEN: 9}
    assert rig.engine.cancelled == []

    events = rig.ledger_events()
    assert {u: (e.quantity, e.status, e.amount_micros) for u, e in events.items()} == {
        Unit.INPUT_TOKEN: (9, UsageStatus.SUCCEEDED, 9 * IN_PRICE),
        Unit.OUTPUT_TOKEN: (9, UsageStatus.SUCCEEDED, 9 * OUT_PRICE),
    }
    assert {e.prediction_id for e in events.values()} == {stream.prediction_id}
    assert rig.balance() == (1_000_000 - 9 * IN_PRICE - 9 * OUT_PRICE, 0)


def test_max_tokens_ends_the_stream_with_length(rig: Rig) -> None:
    rig.engine.mode = "count"

    async def scenario() -> list[str]:
        stream = await open_stream(rig, max_tokens=4)
        async with stream:
            return [chunk.text async for chunk in stream]

    assert asyncio.run(scenario()) == ["1", " 2", " 3", " 4"]
    events = rig.ledger_events()
    usage = {u: (e.quantity, e.amount_micros) for u, e in events.items()}
    # Unpriced: free events, the tokens still recorded.
    assert usage == {Unit.PREDICTION: (1, 0), Unit.INPUT_TOKEN: (9, 0), Unit.OUTPUT_TOKEN: (4, 0)}
    assert all(e.compute_ms > 0 for e in events.values())


def test_the_upper_bound_is_held_before_the_first_chunk(rig: Rig) -> None:
    rig.price()
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    bound = len(PROMPT.encode()) * IN_PRICE + 32 * OUT_PRICE

    async def scenario() -> int:
        stream = await open_stream(rig)
        async with stream:
            return rig.balance()[1]

    assert asyncio.run(scenario()) == bound


def test_a_consumer_that_leaves_cancels_the_engine_and_pays_what_was_delivered(
    rig: Rig,
) -> None:
    rig.price()
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    rig.engine.mode, rig.engine.delay = "count", 0.02

    async def scenario() -> CallStream:
        stream = await open_stream(rig, max_tokens=1000, rid="leaves")
        async with stream:
            async for chunk in stream:
                if chunk.text.strip() == "3":
                    break  # the client hung up after three chunks
        return stream

    stream = asyncio.run(scenario())
    assert rig.engine.cancelled == ["leaves"]
    produced = rig.engine.records[0].produced
    time.sleep(0.1)
    assert rig.engine.records[0].produced == produced  # no work goes on for nobody
    assert stream.status is UsageStatus.CANCELLED
    events = rig.ledger_events()
    assert {u: (e.quantity, e.status, e.amount_micros) for u, e in events.items()} == {
        Unit.INPUT_TOKEN: (9, UsageStatus.CANCELLED, 9 * IN_PRICE),
        Unit.OUTPUT_TOKEN: (3, UsageStatus.CANCELLED, 3 * OUT_PRICE),
    }
    assert rig.balance() == (1_000_000 - 9 * IN_PRICE - 3 * OUT_PRICE, 0)


@pytest.mark.parametrize("rule", list(FailureRule))
def test_a_consumer_cut_pays_what_was_delivered_whatever_the_failure_rule(
    rig: Rig, rule: FailureRule
) -> None:
    """The failure-billing policy charges cancelled work as done: the failure rule
    prices failures and timeouts (the deadline test below), not a caller who left."""
    rig.price(rule, 5000 if rule is FailureRule.FRACTION else 0)
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    rig.engine.mode = "count"

    async def scenario() -> CallStream:
        stream = await open_stream(rig, max_tokens=100, rid="cut")
        async with stream:
            async for chunk in stream:
                if chunk.text.strip() == "4":
                    break
        return stream

    stream = asyncio.run(scenario())
    assert stream.status is UsageStatus.CANCELLED
    out = rig.ledger_events()[Unit.OUTPUT_TOKEN]
    assert (out.quantity, out.status, out.amount_micros) == (
        4,
        UsageStatus.CANCELLED,
        4 * OUT_PRICE,
    )


def test_a_cancelled_consumer_task_cancels_the_engine_and_settles(rig: Rig) -> None:
    rig.price()
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    rig.engine.mode, rig.engine.delay = "count", 0.02
    received: list[str] = []

    async def consume() -> None:
        stream = await open_stream(rig, max_tokens=1000, rid="gone")
        async with stream:
            async for chunk in stream:
                received.append(chunk.text)

    async def scenario() -> None:
        task = asyncio.create_task(consume())
        while len(received) < 2:
            await asyncio.sleep(0.005)
        task.cancel()  # what a surface does when the connection drops
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert rig.engine.cancelled == ["gone"]
    events = rig.ledger_events()
    assert events[Unit.OUTPUT_TOKEN].status is UsageStatus.CANCELLED
    assert events[Unit.OUTPUT_TOKEN].quantity == len(received)
    assert rig.balance()[1] == 0


@pytest.mark.parametrize(
    ("rule", "bps", "charged_bps"),
    [(FailureRule.NONE, 0, 0), (FailureRule.FRACTION, 5000, 5000), (FailureRule.FULL, 0, 10000)],
)
def test_the_deadline_cuts_the_stream_and_the_failure_rule_prices_what_was_delivered(
    rig: Rig, rule: FailureRule, bps: int, charged_bps: int
) -> None:
    rig.price(rule, bps)
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    # A token each 0.2 s against 2 s: at most 10 by the deadline, and nearly 2 s for a
    # loaded machine to open the stream and send the first.
    rig.engine.mode, rig.engine.delay = "count", 0.2
    received: list[str] = []

    async def scenario() -> CallStream:
        stream = await open_stream(rig, max_tokens=1000, timeout=2.0, rid="late")
        with pytest.raises(DeadlineExceeded):
            async with stream:
                async for chunk in stream:
                    received.append(chunk.text)
        return stream

    stream = asyncio.run(scenario())
    assert 1 <= len(received) < 20  # some went out before the deadline, not all
    assert stream.status is UsageStatus.TIMEOUT
    assert rig.engine.cancelled == ["late"]
    events = rig.ledger_events()
    out = events[Unit.OUTPUT_TOKEN]
    assert (out.quantity, out.status) == (len(received), UsageStatus.TIMEOUT)
    assert out.amount_micros == len(received) * OUT_PRICE * charged_bps // 10_000
    charged = out.amount_micros + events[Unit.INPUT_TOKEN].amount_micros
    assert rig.balance() == (1_000_000 - charged, 0)


def test_an_upper_bound_over_the_balance_is_refused_before_anything_runs(rig: Rig) -> None:
    rig.price()
    bound = len(PROMPT.encode()) * IN_PRICE + 32 * OUT_PRICE
    rig.balances.credit(BalanceScope.TENANT, "beta", bound - 1, tenant="beta")

    with pytest.raises(PaymentRequired) as caught:
        asyncio.run(open_stream(rig))
    assert caught.value.code == "budget_exceeded"
    assert rig.engine.records == []
    assert rig.balance() == (bound - 1, 0)
    assert rig.ledger_events() == {}
    # A smaller bound fits: the refusal was about the bound, not the balance being spent.
    asyncio.run(_drain(open_stream(rig, max_tokens=31)))


async def _drain(opening: Any) -> None:
    stream = await opening
    async with stream:
        async for _ in stream:
            pass


def test_the_admission_is_released_whatever_ends_the_stream(rig: Rig) -> None:
    rig.limits.set_limits(
        ScopeType.TENANT, "beta", tenant="beta", rpm=None, concurrency=1, tpm=None, actor="t"
    )
    rig.engine.mode = "count"

    async def scenario() -> None:
        stream = await open_stream(rig, max_tokens=100)
        with pytest.raises(Overloaded):  # one at a time
            await open_stream(rig, rid="second")
        async with stream:
            await stream.receive()  # leaves after one chunk
        await _drain(open_stream(rig, max_tokens=2))  # the slot came back

    asyncio.run(scenario())


def test_a_tensor_model_cannot_stream(rig: Rig) -> None:
    from tests.runtime.conftest import add_one_manifest

    manifest, digest = add_one_manifest(DictBlobSource())
    target = StreamTarget(VersionRef("acme/adder", "1", digest, manifest))
    request = GenerateRequest(prompt="hi", max_tokens=4)
    with pytest.raises(Unprocessable) as caught:
        asyncio.run(rig.calls.stream(Caller(CONSUMER), target, request, time.monotonic() + 5))
    assert caught.value.code == "streaming_unsupported"


def test_a_dropped_iterator_ends_the_call_as_a_cancellation(rig: Rig) -> None:
    rig.price()
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    rig.engine.mode, rig.engine.delay = "count", 0.01

    async def scenario() -> CallStream:
        stream = await open_stream(rig, max_tokens=1000, rid="dropped")
        async for _ in stream:  # no ``async with``, no aclose: the loop is just left
            break
        # The event loop closes the dropped iterator soon after (later on a loaded machine).
        deadline = time.monotonic() + 30
        while stream.status is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return stream

    stream = asyncio.run(scenario())
    assert stream.status is UsageStatus.CANCELLED
    assert rig.engine.cancelled == ["dropped"]
    assert rig.ledger_events()[Unit.OUTPUT_TOKEN].quantity == 1
    assert rig.balance()[1] == 0


def test_a_backend_that_refuses_before_running_gives_the_hold_back(rig: Rig) -> None:
    rig.price()
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    backend = rig.calls.backend
    assert isinstance(backend, LocalBackend)
    backend.load_on_demand = False  # the version is not loaded here

    with pytest.raises(Unavailable) as caught:
        asyncio.run(open_stream(rig))
    assert caught.value.code == "model_not_loaded"
    assert rig.balance() == (1_000_000, 0)
    assert rig.ledger_events() == {}
    assert rig.reservations.held("beta") == []


def test_bad_requests_are_refused_before_anything_is_held(rig: Rig) -> None:
    rig.price()
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    with pytest.raises(InvalidInput) as caught:
        asyncio.run(open_stream(rig, max_tokens=0))
    assert caught.value.code == "invalid_max_tokens"
    with pytest.raises(DeadlineExceeded):
        asyncio.run(open_stream(rig, timeout=-1))
    assert rig.balance() == (1_000_000, 0) and rig.engine.records == []


@pytest.mark.parametrize("end", ["completed", "disconnected"])
def test_with_the_usage_journal_a_stream_settles_the_same(
    rig: Rig, tmp_path: Path, end: str
) -> None:
    """The embedded default settles through the usage journal, applied moments later."""
    rig.price()
    rig.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    journal = UsageJournal(tmp_path / "journal", rig.reservations)
    rig.meter.journal = journal
    rig.engine.mode = "count"

    async def scenario() -> CallStream:
        stream = await open_stream(rig, max_tokens=4, rid=end)
        async with stream:
            async for chunk in stream:
                if end == "disconnected" and chunk.text.strip() == "2":
                    break
        return stream

    try:
        stream = asyncio.run(scenario())
        assert journal.flush()
    finally:
        journal.close()
    delivered = 4 if end == "completed" else 2
    assert stream.status is (UsageStatus.SUCCEEDED if end == "completed" else UsageStatus.CANCELLED)
    events = rig.ledger_events()
    assert events[Unit.OUTPUT_TOKEN].quantity == delivered
    assert rig.balance() == (1_000_000 - 9 * IN_PRICE - delivered * OUT_PRICE, 0)


def test_tokens_per_minute_count_the_calls_token_bound_before_it_runs(rig: Rig) -> None:
    bound = len(PROMPT.encode()) + 32  # the prompt's bytes and max_tokens: 75
    rig.limits.set_limits(
        ScopeType.TENANT, "beta", tenant="beta", rpm=None, concurrency=None, tpm=100, actor="t"
    )

    async def scenario() -> None:
        await _drain(open_stream(rig, max_tokens=32))  # 75 of 100
        with pytest.raises(Overloaded) as caught:
            await open_stream(rig, max_tokens=32, rid="over")
        assert caught.value.code == "rate_limited"
        await _drain(open_stream(rig, prompt="hi", max_tokens=100 - bound - 2))  # what is left

    asyncio.run(scenario())
    assert [r.request.request_id for r in rig.engine.records] == ["r1", "r1"]
