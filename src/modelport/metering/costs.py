"""What calls cost the operator to serve: their measured compute, priced per second.

A call's compute is what the runtime measured for it (``Usage.cpu_ms`` and ``gpu_ms``:
its rows' share of its executed batch's time), recorded on its usage events as
``compute_ms`` with its GPU part as ``gpu_ms``. ``ComputePrices`` prices the GPU part
per GPU-second and the rest per core-second (settings ``cost_per_core_second_micros``,
``cost_per_gpu_second_micros``). ``CostReport`` reads the ledger: per tenant and model,
the calls, their compute, its cost, what was charged for them (revenue) and the margin
(revenue less cost). Every event of one call carries the call's compute, so a call's
compute is counted once (by ``prediction_id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from modelport.store import Database
from modelport.store.tables import UsageEventRow


@dataclass(frozen=True)
class ComputePrices:
    core_second_micros: float = 0.0
    gpu_second_micros: float = 0.0

    def cost_micros(self, cpu_ms: float, gpu_ms: float = 0.0) -> float:
        return (cpu_ms * self.core_second_micros + gpu_ms * self.gpu_second_micros) / 1000


@dataclass(frozen=True)
class CostLine:
    """One tenant's calls to one model over a period."""

    tenant: str
    model: str
    calls: int
    compute_ms: float
    """CPU and GPU time together."""
    cost_micros: float
    revenue_micros: int
    gpu_ms: float = 0.0
    """Of ``compute_ms``, the GPU's."""

    @property
    def margin_micros(self) -> float:
        return self.revenue_micros - self.cost_micros


class CostReport:
    """Costs, revenue and margins read from the usage ledger."""

    def __init__(self, database: Database, prices: ComputePrices) -> None:
        self.database = database
        self.prices = prices

    def lines(
        self, since: datetime, until: datetime, *, tenant: str | None = None
    ) -> list[CostLine]:
        """Calls that finished in ``[since, until)``, per tenant and model."""
        e = UsageEventRow
        where = [e.finished_at >= since, e.finished_at < until]
        if tenant is not None:
            where.append(e.tenant == tenant)
        per_call = (
            select(
                e.tenant,
                e.model,
                func.max(e.compute_ms).label("compute_ms"),
                func.max(e.gpu_ms).label("gpu_ms"),
                func.sum(e.amount_micros).label("amount"),
            )
            .where(*where)
            .group_by(e.tenant, e.model, e.prediction_id)
            .subquery()
        )
        rows = select(
            per_call.c.tenant,
            per_call.c.model,
            func.count(),
            func.sum(per_call.c.compute_ms),
            func.sum(per_call.c.gpu_ms),
            func.sum(per_call.c.amount),
        ).group_by(per_call.c.tenant, per_call.c.model)
        with self.database.transaction() as session:
            found = session.execute(rows.order_by(per_call.c.tenant, per_call.c.model)).all()
        return [_line(self.prices, *row) for row in found]


def _line(
    prices: ComputePrices,
    tenant: str,
    model: str,
    calls: int,
    compute: float | None,
    gpu: float | None,
    amount: int | None,
) -> CostLine:
    compute_ms, gpu_ms = float(compute or 0.0), float(gpu or 0.0)
    return CostLine(
        tenant=tenant,
        model=model,
        calls=int(calls),
        compute_ms=compute_ms,
        cost_micros=prices.cost_micros(compute_ms - gpu_ms, gpu_ms),
        revenue_micros=int(amount or 0),
        gpu_ms=gpu_ms,
    )
