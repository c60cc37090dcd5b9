"""The canary judge: is the candidate behaving as well as the stable version? Pure.

The candidate is judged only once it answered ``min_requests`` in the current
step (before that the verdict is ``wait``). It is ``bad`` when its error rate
exceeds the stable's by more than ``max_error_rate_increase``, or its p99
latency exceeds the stable's by more than ``max_p99_increase`` (a fraction of
the stable's p99, plus ``latency_slack_ms``; with no stable traffic to compare,
latency is not judged).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from modelport.serving.endpoints.types import CanaryPolicy, Stats


class Verdict(StrEnum):
    WAIT = "wait"
    GOOD = "good"
    BAD = "bad"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str = ""


@dataclass(frozen=True)
class Gate:
    """One test of the judge, with what it observed and the limit it holds it to."""

    name: str
    """``requests``, ``error_rate`` or ``p99_latency_ms``."""
    observed: float
    """The candidate's value in the current step."""
    limit: float | None
    """The least (``requests``) or most it may be; None when it is not judged yet."""
    passing: bool | None
    """None: not judged yet (too few requests, or no stable traffic to compare latency)."""


def gates(policy: CanaryPolicy, stable: Stats, candidate: Stats) -> list[Gate]:
    """The judge's tests on this step's traffic, for people to watch (``judge`` decides)."""
    enough = candidate.requests >= policy.min_requests
    error_limit = stable.error_rate + policy.max_error_rate_increase
    found = [
        # Too few requests is a wait, never a failure.
        Gate("requests", candidate.requests, policy.min_requests, True if enough else None),
        Gate(
            "error_rate",
            candidate.error_rate,
            error_limit,
            candidate.error_rate - stable.error_rate <= policy.max_error_rate_increase
            if enough
            else None,
        ),
    ]
    compared = stable.requests - stable.errors > 0 and candidate.requests > candidate.errors
    allowed = stable.p99 * (1 + policy.max_p99_increase) + policy.latency_slack_ms / 1000
    found.append(
        Gate(
            "p99_latency_ms",
            candidate.p99 * 1000,
            allowed * 1000 if compared else None,
            candidate.p99 <= allowed if enough and compared else None,
        )
    )
    return found


def judge(policy: CanaryPolicy, stable: Stats, candidate: Stats) -> Judgement:
    if candidate.requests < policy.min_requests:
        return Judgement(
            Verdict.WAIT, f"{candidate.requests} of {policy.min_requests} candidate requests"
        )
    error_margin = candidate.error_rate - stable.error_rate
    if error_margin > policy.max_error_rate_increase:
        return Judgement(
            Verdict.BAD,
            f"candidate error rate {candidate.error_rate:.1%} against the stable's "
            f"{stable.error_rate:.1%} (allowed +{policy.max_error_rate_increase:.1%})",
        )
    if stable.requests - stable.errors > 0 and candidate.requests > candidate.errors:
        allowed = stable.p99 * (1 + policy.max_p99_increase) + policy.latency_slack_ms / 1000
        if candidate.p99 > allowed:
            return Judgement(
                Verdict.BAD,
                f"candidate p99 latency {candidate.p99 * 1000:.1f} ms against the stable's "
                f"{stable.p99 * 1000:.1f} ms (allowed +{policy.max_p99_increase:.0%})",
            )
    return Judgement(Verdict.GOOD)
