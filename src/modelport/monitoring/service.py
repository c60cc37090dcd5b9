"""Monitor policies, reports, and the scheduled check that acts on them.

A report groups an endpoint's answered predictions by version and experiment arm (a
shadow's copies are the arm ``shadow``). Inputs are compared with the reference: the
endpoint's answers of the window before the current one (every version's: what callers
sent), or each version's validation data (its manifest's examples). Outputs (the
answer's label or value, and the logged output tensors) are compared with the same
version's reference answers where it has enough, else with the endpoint's. Quality
comes from the outcomes joined to the window's answers, overall and by the policy's
slice.

``check`` runs every endpoint's monitor whose interval has passed: it exports the
report (``MonitoringMetrics``), logs a ``monitoring.breach`` warning for a version in
breach and, where the policy says ``halt_canary``, halts a running canary whose
candidate is in breach, as the canary judge would.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from modelport.clock import Clock
from modelport.logs import log_event
from modelport.monitoring.columns import Samples
from modelport.monitoring.drift import Drift, categorical_drift, numeric_drift
from modelport.monitoring.metrics import MonitoringMetrics
from modelport.monitoring.quality import Quality, quality
from modelport.monitoring.repository import LoggedAnswer, MonitorRepository
from modelport.monitoring.types import MonitoringReport, MonitorPolicy, VersionReport

log = logging.getLogger(__name__)

ExampleTensors = Callable[[str, str], tuple[list[dict[str, Any]], list[dict[str, Any]]]]
"""``(model, version)`` -> the inputs and outputs of the version's manifest examples."""


class CanaryControl(Protocol):
    """What halting a canary needs of the endpoints (``EndpointService``)."""

    def running_canary(self, endpoint: str) -> tuple[int, int, str] | None:
        """``(deployment, step, candidate ref)`` of the endpoint's running canary."""
        ...

    def halt_canary(self, endpoint: str, deployment: int, step: int, reason: str) -> bool: ...


class MonitoringService:
    def __init__(
        self,
        repository: MonitorRepository,
        *,
        clock: Clock,
        examples: ExampleTensors,
        endpoint_exists: Callable[[str], object],
        canaries: CanaryControl | None = None,
        metrics: MonitoringMetrics | None = None,
    ) -> None:
        self._repo = repository
        self._clock = clock
        self._examples = examples
        self._endpoint_exists = endpoint_exists
        self._canaries = canaries
        self._metrics = metrics
        self._last_run: dict[str, datetime] = {}

    # ---- policies
    def policy(self, endpoint: str) -> MonitorPolicy | None:
        return self._repo.policy(endpoint)

    def set_policy(self, endpoint: str, policy: MonitorPolicy, *, actor: str) -> MonitorPolicy:
        self._endpoint_exists(endpoint)  # raises endpoint_not_found
        self._repo.set_policy(endpoint, policy, actor=actor)
        return policy

    def delete_policy(self, endpoint: str) -> bool:
        self._last_run.pop(endpoint, None)
        return self._repo.delete_policy(endpoint)

    # ---- reports
    def report(self, endpoint: str, policy: MonitorPolicy | None = None) -> MonitoringReport:
        """The endpoint's report under ``policy`` (its stored one, else the defaults)."""
        policy = policy or self._repo.policy(endpoint) or MonitorPolicy()
        now = self._clock.now()
        start = now - timedelta(hours=policy.window_hours)
        current = self._repo.answers(endpoint, start, now)
        reference_window: tuple[datetime, datetime] | None = None
        reference: list[LoggedAnswer] = []
        if policy.reference == "window":
            reference_window = (start - timedelta(hours=policy.reference_hours), start)
            reference = self._repo.answers(endpoint, *reference_window)
        groups: dict[tuple[str, str, str | None], list[LoggedAnswer]] = defaultdict(list)
        for answer in current:
            groups[(answer.model, answer.version, answer.arm)].append(answer)
        versions = [
            self._version(policy, key, answers, reference)
            for key, answers in sorted(groups.items(), key=lambda item: str(item[0]))
        ]
        return MonitoringReport(endpoint, policy, now, (start, now), reference_window, versions)

    def _version(
        self,
        policy: MonitorPolicy,
        key: tuple[str, str, str | None],
        answers: list[LoggedAnswer],
        pooled: list[LoggedAnswer],
    ) -> VersionReport:
        model, version, arm = key
        current_in, current_out = _samples(answers)
        if policy.reference == "validation":
            example_inputs, example_outputs = self._examples(model, version)
            reference_in, reference_out = Samples(), Samples()
            reference_in.add(example_inputs)
            reference_out.add(example_outputs)
            reference_count = len(example_inputs)
        else:
            own = [a for a in pooled if (a.model, a.version) == (model, version)]
            reference_in, _ = _samples(pooled)
            reference_out = _samples(own if len(own) >= policy.min_samples else pooled)[1]
            reference_count = len(pooled)
        inputs = _compare(policy, reference_in, current_in)
        outputs = _compare(policy, reference_out, current_out)
        qualities = _qualities(policy, answers)
        breaches = [
            f"input {d.feature} drifted (psi {d.psi:.3f}, p {d.p_value:.2g})"
            for d in inputs
            if d.drifted
        ]
        breaches += [
            f"output {d.feature} drifted (psi {d.psi:.3f}, p {d.p_value:.2g})"
            for d in outputs
            if d.drifted
        ]
        overall = qualities[0]
        if (
            policy.min_accuracy is not None
            and overall.accuracy is not None
            and overall.labelled >= policy.min_samples
            and overall.accuracy < policy.min_accuracy
        ):
            breaches.append(f"accuracy {overall.accuracy:.3f} below {policy.min_accuracy}")
        return VersionReport(
            model, version, arm, len(answers), reference_count, inputs, outputs, qualities, breaches
        )

    # ---- the schedule
    def check(self) -> list[MonitoringReport]:
        """Run each monitor whose interval has passed; export, alert, halt (see module)."""
        now = self._clock.now()
        done = []
        for endpoint, policy in self._repo.policies().items():
            last = self._last_run.get(endpoint)
            if last is not None and (now - last).total_seconds() < policy.interval_seconds:
                continue
            self._last_run[endpoint] = now
            report = self.report(endpoint, policy)
            if self._metrics is not None:
                self._metrics.export(report)
            self._act(report)
            done.append(report)
        return done

    def _act(self, report: MonitoringReport) -> None:
        breached = {f"{v.model}:{v.version}": v for v in report.versions if v.in_breach}
        for ref, version in breached.items():
            log_event(
                log, "monitoring.breach", level=logging.WARNING, endpoint=report.endpoint,
                version=ref, arm=version.arm, reasons="; ".join(version.breaches),
            )  # fmt: skip
        if not breached or not report.policy.halt_canary or self._canaries is None:
            return
        canary = self._canaries.running_canary(report.endpoint)
        if canary is None:
            return
        deployment, step, candidate = canary
        if candidate in breached:
            reason = "monitor: " + "; ".join(breached[candidate].breaches)
            if self._canaries.halt_canary(report.endpoint, deployment, step, reason[:500]):
                log_event(
                    log, "canary.halted", level=logging.WARNING, endpoint=report.endpoint,
                    deployment=deployment, step=step, reason=reason,
                )  # fmt: skip


def _samples(answers: Iterable[LoggedAnswer]) -> tuple[Samples, Samples]:
    inputs, outputs = Samples(), Samples()
    for answer in answers:
        if answer.inputs:
            inputs.add(answer.inputs)
        if answer.outputs:
            outputs.add(answer.outputs)
        if answer.answer_value is not None:
            outputs.numeric["answer_value"].append(answer.answer_value)
        if answer.answer_label is not None:
            outputs.categorical["answer_label"].append(answer.answer_label)
    return inputs, outputs


def _compare(policy: MonitorPolicy, reference: Samples, current: Samples) -> list[Drift]:
    found: list[Drift] = []
    limits = {"psi_limit": policy.psi_limit, "p_limit": policy.p_value_limit}
    for feature in sorted(set(reference.numeric) & set(current.numeric)):
        ref, cur = reference.numeric_array(feature), current.numeric_array(feature)
        if min(len(ref), len(cur)) >= policy.min_samples:
            found.append(numeric_drift(feature, ref, cur, **limits))
    for feature in sorted(set(reference.categorical) & set(current.categorical)):
        ref_c, cur_c = reference.categorical[feature], current.categorical[feature]
        if min(len(ref_c), len(cur_c)) >= policy.min_samples:
            found.append(categorical_drift(feature, ref_c, cur_c, **limits))
    return found


def _qualities(policy: MonitorPolicy, answers: Sequence[LoggedAnswer]) -> list[Quality]:
    """Overall first, then one per slice value."""
    slices: dict[str | None, list[LoggedAnswer]] = {None: list(answers)}
    if policy.slice_by is not None:
        for answer in answers:
            slices.setdefault(_slice_value(policy.slice_by, answer), []).append(answer)
    result = []
    for name, members in slices.items():
        labels = [
            (a.answer_label, a.outcome_label)
            for a in members
            if a.answer_label is not None and a.outcome_label is not None
        ]
        values = [
            (a.answer_value, a.outcome_value)
            for a in members
            if a.answer_value is not None and a.outcome_value is not None
        ]
        result.append(quality(name, labels, values))
    return result


def _slice_value(slice_by: str, answer: LoggedAnswer) -> str:
    if slice_by == "model_version":
        return f"{answer.model}:{answer.version}"
    if slice_by.startswith("feature:"):
        feature = slice_by.removeprefix("feature:")
        samples = Samples()
        samples.add(answer.inputs or [])
        values: Mapping[str, Sequence[object]] = {**samples.categorical, **samples.numeric}
        found = values.get(feature)
        return str(found[0]) if found else "(none)"
    value = getattr(answer, slice_by)
    return "(none)" if value is None else str(value)
