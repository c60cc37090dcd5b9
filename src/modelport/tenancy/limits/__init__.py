"""Rate, concurrency and budget limits per tenant, API key and model.

Embedded mode counts in process memory; with ``MODELPORT_REDIS_URL`` every
gateway shares the counts through Redis. See :mod:`.service` for the order in
which a call meets them.
"""

from modelport.tenancy.limits.budgets import (
    BudgetGuard,
    BudgetRepository,
    DatabaseBudgetGuard,
    NoBudgets,
    period_of,
)
from modelport.tenancy.limits.inprocess import InProcessConcurrencyLimiter, InProcessRateLimiter
from modelport.tenancy.limits.interface import ConcurrencyLimiter, RateLimiter
from modelport.tenancy.limits.policy import API, INFER, LimitPolicy
from modelport.tenancy.limits.repository import LimitRepository
from modelport.tenancy.limits.service import Admission, LimitService
from modelport.tenancy.limits.types import (
    Budget,
    BudgetAlert,
    Lease,
    Limits,
    RateDecision,
    RateItem,
    RateLimited,
    ScopeType,
    SlotDecision,
    SlotItem,
    Subject,
)

__all__ = [
    "API",
    "INFER",
    "Admission",
    "Budget",
    "BudgetAlert",
    "BudgetGuard",
    "BudgetRepository",
    "ConcurrencyLimiter",
    "DatabaseBudgetGuard",
    "InProcessConcurrencyLimiter",
    "InProcessRateLimiter",
    "Lease",
    "LimitPolicy",
    "LimitRepository",
    "LimitService",
    "Limits",
    "NoBudgets",
    "RateDecision",
    "RateItem",
    "RateLimited",
    "RateLimiter",
    "ScopeType",
    "SlotDecision",
    "SlotItem",
    "Subject",
    "period_of",
]
