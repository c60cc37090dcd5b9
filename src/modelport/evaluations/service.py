"""Evaluations and leaderboards as a tenant sees them.

``submit`` checks everything that can be known before any work (the dataset split
readable by the caller, the model, or the endpoint, callable by it, the task and columns
matching) and starts the evaluation's job (``evaluations.stage``); the job is metered and
billed as any job's calls are. An endpoint evaluation calls through the endpoint's
routing; every version its traffic may reach is checked as a model's would be. An evaluation's scores are written once, by its job; a job that
failed leaves the evaluation ``failed`` with the job's error code (seen when it is next
read). ``claim`` records a publisher's own scores, kept apart as ``claimed``.

A leaderboard (per task and dataset, optionally one split) ranks every published,
verified evaluation whose model the viewer may see by the task's score
(``metrics.PRIMARY``), with the version's price and the measured latency beside it; the
publishers' claims on the same dataset are listed apart, never ranked. An endpoint
evaluation ranks as a version's verified score only when one version served every row
(it then names that version); one whose rows several versions served (a traffic split, a
fallback) measured the endpoint, not a version: it is listed apart (``endpoints``),
unranked, and never counts for routing or the catalog's score.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime

import anyio.to_thread

from modelport.datasets.service import DatasetService
from modelport.datasets.types import DatasetVersion
from modelport.errors import InvalidInput, NotFound
from modelport.evaluations import repository as repo
from modelport.evaluations.metrics import PRIMARY, SUITES
from modelport.evaluations.types import (
    BoardEntry,
    Claim,
    Evaluation,
    EvaluationKind,
    EvaluationState,
    Leaderboard,
    NewEvaluation,
    Price,
    VersionScore,
)
from modelport.ids import unique_id
from modelport.inference.service import InferenceService
from modelport.inference.types import Caller
from modelport.jobs.service import JobService, Submission
from modelport.jobs.types import EVALUATE, JobState, StageSpec
from modelport.manifest import Manifest
from modelport.metering.types import PriceSnapshot, Unit
from modelport.registry.names import check_model_name, check_owner, check_version
from modelport.registry.service import RegistryService
from modelport.registry.types import Model, ModelVersion
from modelport.store import Database
from modelport.tenancy.access import callable_refusal, decide_model, is_operator, needs_grants
from modelport.tenancy.enforce import enforce, refuse
from modelport.tenancy.policy import Decision, Namespace, Permission
from modelport.tenancy.types import GrantSet, Principal

STAGE_TIMEOUT_SECONDS = 6 * 3600.0
MAX_ROWS = 1_000_000
"""The most rows one evaluation scores: its answers are held until they are scored."""
KNOWN_METRICS: dict[str, frozenset[str]] = {
    "classification": frozenset({"accuracy", "f1_macro", "log_loss"}),
    "regression": frozenset({"mae", "rmse", "r2"}),
    "chat": frozenset({"exact_match", "similarity"}),
    "embedding": frozenset({"recall_at_1", "mrr"}),
}
assert set(KNOWN_METRICS) == set(SUITES) == set(PRIMARY)


def evaluation_not_found(evaluation_id: str) -> NotFound:
    return NotFound(
        f"evaluation '{evaluation_id}' not found",
        code="evaluation_not_found",
        evaluation=evaluation_id,
    )


def _ref(value: str, field: str) -> tuple[str, str]:
    owner, _, name = value.partition("/")
    if not owner or not name or "/" in name:
        raise InvalidInput(
            f"{field} {value!r} is not owner/name", code="invalid_target", field=field
        )
    return check_owner(owner), check_model_name(name)


def task_matches(model_task: str, dataset_task: str) -> bool:
    """A model declaring no task may be evaluated on any; one declaring a task only on a
    dataset of it (``text-classification`` is a ``classification``)."""
    return not model_task or model_task == dataset_task or model_task.endswith("-" + dataset_task)


def check_columns(manifest: Manifest, dataset: DatasetVersion, output: str | None) -> str:
    """The feature columns must be the model's inputs, name for name and datatype for
    datatype (400 ``column_mismatch``); answers the output scored (400 ``unknown_output``)."""
    inputs = {spec.name: spec for spec in manifest.inputs}
    features = {c.name: c for c in dataset.manifest.features}
    if set(inputs) != set(features):
        raise InvalidInput(
            f"the dataset's feature columns {sorted(features)} must be the model's inputs "
            f"{sorted(inputs)}",
            code="column_mismatch",
        )
    for name, column in features.items():
        spec = inputs[name]
        if spec.datatype != column.datatype or len(spec.shape) != 1 + len(column.shape):
            raise InvalidInput(
                f"column {name!r} is {column.datatype} {column.shape} a row; the model's "
                f"input is {spec.datatype} {spec.shape}",
                code="column_mismatch",
                column=name,
            )
    names = [spec.name for spec in manifest.outputs]
    chosen = output if output is not None else names[0]
    if chosen not in names:
        raise InvalidInput(
            f"the model has no output {chosen!r}; there are {names}", code="unknown_output"
        )
    return chosen


def price_of(snapshots: Mapping[Unit, PriceSnapshot]) -> Price:
    """A version's prices per 1,000 calls or rows and per million tokens."""

    def per(unit: Unit, count: int) -> int | None:
        snapshot = snapshots.get(unit)
        if snapshot is None or snapshot.rule_id is None:
            return None
        return snapshot.unit_price_micros * count // snapshot.per_units

    return Price(
        per_1k_calls_micros=per(Unit.PREDICTION, 1000),
        per_1k_rows_micros=per(Unit.ROW, 1000),
        per_1m_input_tokens_micros=per(Unit.INPUT_TOKEN, 1_000_000),
        per_1m_output_tokens_micros=per(Unit.OUTPUT_TOKEN, 1_000_000),
    )


class EvaluationService:
    def __init__(
        self,
        database: Database,
        datasets: DatasetService,
        registry: RegistryService,
        inference: InferenceService,
        jobs: JobService,
        *,
        prices: Callable[[str, str, datetime], Mapping[Unit, PriceSnapshot]],
        grants: Callable[[str], GrantSet],
        now: Callable[[], datetime],
    ) -> None:
        self.database = database
        self.datasets = datasets
        self.registry = registry
        self.inference = inference
        self.jobs = jobs
        self.prices = prices
        """A version's prices now (``PriceBook.prices``)."""
        self.grants = grants
        self.now = now

    # ---- verified evaluations
    async def submit(self, principal: Principal, new: NewEvaluation) -> Evaluation:
        """Check and start an evaluation (see the module docstring)."""
        tenant = principal.tenant
        if tenant is None:
            raise InvalidInput(
                "an evaluation runs in a tenant: submit it with a key of the tenant",
                code="tenant_required",
            )
        if (new.model is None) == (new.endpoint is None):
            raise InvalidInput(
                "an evaluation names a model or an endpoint, one of them",
                code="invalid_target",
                field="model",
            )
        if new.endpoint is not None and new.version is not None:
            raise InvalidInput(
                "an endpoint is evaluated without a version: its routing picks one a call",
                code="invalid_target",
                field="version",
            )
        dataset_owner, dataset_name = _ref(new.dataset, "dataset")
        check_version(new.dataset_version)
        if new.version is not None:
            check_version(new.version)
        dataset = await anyio.to_thread.run_sync(
            self.datasets.version, principal, dataset_owner, dataset_name, new.dataset_version
        )
        split = dataset.manifest.split(new.split)  # 400 unknown_split
        if split.rows > MAX_ROWS:
            raise InvalidInput(
                f"split {split.name!r} has {split.rows} rows; an evaluation scores at most "
                f"{MAX_ROWS}",
                code="split_too_large",
            )
        if new.endpoint is not None:
            version, output = await self._endpoint_version(
                principal, new.endpoint, dataset, new.output
            )
            return await anyio.to_thread.run_sync(
                self._start, principal, tenant, version, dataset, new, output
            )
        assert new.model is not None
        owner, name = _ref(new.model, "model")
        await self.inference.require_model(principal, owner, name, Permission.MODEL_CALL)
        version = await anyio.to_thread.run_sync(self.registry.resolve, owner, name, new.version)
        refuse(callable_refusal(principal, owner, version.ref, version.state.value))
        model = await anyio.to_thread.run_sync(self.registry.get_model, owner, name)
        if not task_matches(model.task, dataset.task):
            raise InvalidInput(
                f"{model.ref} is a {model.task} model; {dataset.ref} is a {dataset.task} dataset",
                code="task_mismatch",
            )
        output = check_columns(version.manifest, dataset, new.output)
        return await anyio.to_thread.run_sync(
            self._start, principal, tenant, version, dataset, new, output
        )

    async def _endpoint_version(
        self, principal: Principal, name: str, dataset: DatasetVersion, output: str | None
    ) -> tuple[ModelVersion, str]:
        """Check an endpoint evaluation: the caller may call the endpoint (404
        ``endpoint_not_found`` otherwise), it has an active deployment (503
        ``no_active_deployment``), and every version its traffic or fallback chain may
        reach matches the dataset as a model evaluation's version must (task, columns,
        the output scored).
        Answers the version the endpoint runs first and the output."""
        route = await self.inference.route(Caller(principal), name, Permission.MODEL_CALL)
        route.check_active()
        chosen: str | None = None
        for ref in (*route.versions, *route.fallbacks.values()):
            owner, _, model_name = ref.model.partition("/")
            model = await anyio.to_thread.run_sync(self.registry.get_model, owner, model_name)
            if not task_matches(model.task, dataset.task):
                raise InvalidInput(
                    f"endpoint {name} runs {ref.ref}, a {model.task} model; {dataset.ref} is "
                    f"a {dataset.task} dataset",
                    code="task_mismatch",
                )
            scored = check_columns(ref.manifest, dataset, output)
            if chosen is not None and scored != chosen:
                raise InvalidInput(
                    f"the versions endpoint {name} runs name their first outputs differently: "
                    "name the output scored",
                    code="unknown_output",
                )
            chosen = scored
        assert chosen is not None  # an active route has versions
        stable = route.versions[0]
        owner, _, model_name = stable.model.partition("/")
        version = await anyio.to_thread.run_sync(
            self.registry.get_version, owner, model_name, stable.version
        )
        return version, chosen

    def _start(
        self,
        principal: Principal,
        tenant: str,
        version: ModelVersion,
        dataset: DatasetVersion,
        new: NewEvaluation,
        output: str,
    ) -> Evaluation:
        evaluation_id = unique_id()
        with self.database.transaction() as session:
            repo.insert(
                session,
                id=evaluation_id,
                kind=EvaluationKind.VERIFIED,
                tenant=tenant,
                created_by=principal.id,
                job_id=None,
                model_owner=version.owner,
                model_name=version.name,
                model_version=version.version,
                version_digest=version.manifest_digest,
                dataset_owner=dataset.owner,
                dataset_name=dataset.name,
                dataset_version=dataset.version,
                dataset_digest=dataset.digest,
                split=new.split,
                task=dataset.task,
                output=output,
                published=new.publish,
                state=EvaluationState.QUEUED,
                created_at=self.now(),
                endpoint=new.endpoint,
            )
        stage = StageSpec(
            "evaluate",
            EVALUATE,
            retries=2,
            timeout_seconds=STAGE_TIMEOUT_SECONDS,
            params={"evaluation": evaluation_id},
        )
        submission = Submission(
            target_kind="model" if new.endpoint is None else "endpoint",
            target=version.ref if new.endpoint is None else new.endpoint,
            inputs=[],
            pipeline=(stage,),
        )
        try:
            job, _ = self.jobs.submit(principal, submission, internal=True)
        except Exception as exc:
            with self.database.transaction() as session:
                repo.fail(
                    session,
                    evaluation_id,
                    code=getattr(exc, "code", "internal_error"),
                    message=str(exc),
                    at=self.now(),
                )
            raise
        with self.database.transaction() as session:
            repo.attach_job(session, evaluation_id, job.id)
        return self.get(principal, evaluation_id)

    def get(self, principal: Principal, evaluation_id: str) -> Evaluation:
        """An evaluation the caller may read: its tenant's, or a published one of a model
        it may see (404 ``evaluation_not_found`` otherwise)."""
        with self.database.transaction() as session:
            found = repo.get(session, evaluation_id)
        if found is None or not self._may_read(principal, found, {}):
            raise evaluation_not_found(evaluation_id)
        return self._settled(found)

    def _settled(self, evaluation: Evaluation) -> Evaluation:
        """A queued evaluation whose job ended without scores, marked failed with the
        job's error."""
        if evaluation.state is not EvaluationState.QUEUED or evaluation.job_id is None:
            return evaluation
        job = self.jobs.get(None, evaluation.job_id)
        if job.state in (JobState.FAILED, JobState.CANCELLED):
            with self.database.transaction() as session:
                repo.record_failure(
                    session,
                    job.id,
                    code=job.error_code or job.state.value,
                    message=job.error_message or job.state.value,
                    at=job.finished_at or self.now(),
                )
                found = repo.get(session, evaluation.id)
            assert found is not None
            return found
        return evaluation

    def of_model(self, principal: Principal, owner: str, name: str) -> list[Evaluation]:
        """A model's evaluations the caller may read, newest first (the model must be
        one it may see)."""
        model = self.registry.get_model(owner, name)
        if not self._sees_model(principal, model, {}):
            raise NotFound(f"model '{owner}/{name}' not found", code="model_not_found")
        with self.database.transaction() as session:
            found = repo.of_model(session, owner, name)
        return [self._settled(e) for e in found if self._may_read(principal, e, {model.ref: True})]

    # ---- claims
    def claim(self, principal: Principal, claim: Claim) -> Evaluation:
        """Record a publisher's own scores for a version of its model: it needs
        ``model.register`` in the model's namespace; the dataset split must be one it may
        read, the metrics the task's (400 ``invalid_claim``)."""
        owner, name = _ref(claim.model, "model")
        enforce(
            principal,
            Permission.MODEL_REGISTER,
            Namespace(owner),
            hidden=lambda: NotFound(f"model '{claim.model}' not found", code="model_not_found"),
        )
        version = self.registry.get_version(owner, name, claim.version)
        dataset_owner, dataset_name = _ref(claim.dataset, "dataset")
        dataset = self.datasets.version(
            principal, dataset_owner, dataset_name, claim.dataset_version
        )
        dataset.manifest.split(claim.split)
        known = KNOWN_METRICS[dataset.task]
        metric, _ = PRIMARY[dataset.task]
        bad = [k for k, v in claim.metrics.items() if k not in known or not math.isfinite(v)]
        if bad or metric not in claim.metrics:
            raise InvalidInput(
                f"a {dataset.task} claim states {metric!r} and only {sorted(known)}, as numbers",
                code="invalid_claim",
            )
        now = self.now()
        with self.database.transaction() as session:
            made = repo.insert(
                session,
                id=unique_id(),
                kind=EvaluationKind.CLAIMED,
                tenant=owner,
                created_by=principal.id,
                job_id=None,
                model_owner=owner,
                model_name=name,
                model_version=version.version,
                version_digest=version.manifest_digest,
                dataset_owner=dataset.owner,
                dataset_name=dataset.name,
                dataset_version=dataset.version,
                dataset_digest=dataset.digest,
                split=claim.split,
                task=dataset.task,
                output="",
                published=True,
                state=EvaluationState.SUCCEEDED,
                metrics={k: float(v) for k, v in claim.metrics.items()},
                created_at=now,
                finished_at=now,
            )
        return made

    # ---- leaderboards
    def leaderboard(
        self, principal: Principal, task: str, dataset: str, split: str | None = None
    ) -> Leaderboard:
        """The board of ``task`` on ``dataset`` (see the module docstring); 404
        ``dataset_not_found`` for a dataset the caller may not see."""
        if task not in PRIMARY:
            raise InvalidInput(
                f"task must be one of {', '.join(PRIMARY)}", code="invalid_task", field="task"
            )
        owner, name = _ref(dataset, "dataset")
        self.datasets.require(principal, owner, name, Permission.MODEL_READ)
        metric, higher = PRIMARY[task]
        with self.database.transaction() as session:
            found = repo.board(session, task, owner, name, split)
        seen: dict[str, bool] = {}
        shown = [
            e
            for e in found
            if e.metrics is not None and metric in e.metrics and self._sees(principal, e, seen)
        ]
        prices: dict[tuple[str, str], Price] = {}
        now = self.now()

        def entry(e: Evaluation, rank: int | None) -> BoardEntry:
            key = (e.model, e.model_version)
            if key not in prices:
                prices[key] = price_of(self.prices(e.model, e.model_version, now))
            assert e.metrics is not None
            return BoardEntry(rank, e, e.metrics[metric], prices[key])

        def order(e: Evaluation) -> tuple[float, float, str]:
            assert e.metrics is not None
            value = e.metrics[metric]
            latency = e.latency_ms if e.latency_ms is not None else math.inf
            return (-value if higher else value, latency, e.id)

        verified = sorted((e for e in shown if e.version_score), key=order)
        claimed = sorted((e for e in shown if e.kind is EvaluationKind.CLAIMED), key=order)
        mixed = sorted(
            (e for e in shown if e.kind is EvaluationKind.VERIFIED and not e.version_score),
            key=order,
        )
        return Leaderboard(
            task=task,
            dataset=f"{owner}/{name}",
            split=split,
            metric=metric,
            higher_is_better=higher,
            verified=[entry(e, i + 1) for i, e in enumerate(verified)],
            claimed=[entry(e, None) for e in claimed],
            endpoints=[entry(e, None) for e in mixed],
        )

    def best_scores(self, task: str) -> dict[tuple[str, str], VersionScore]:
        """Each version's best verified, published score on ``task``'s leaderboard metric
        (any dataset), with that evaluation's measured latency: what routing by need
        weighs (``inference.routed``). The board is the one a model of ``task`` is
        evaluated on (``task_matches``: ``text-classification`` on ``classification``).
        Claims never count. Blocking."""
        board = next((b for b in PRIMARY if task and task_matches(task, b)), None)
        if board is None:
            return {}
        metric, higher = PRIMARY[board]
        with self.database.transaction() as session:
            found = repo.verified(session, board)
        best: dict[tuple[str, str], VersionScore] = {}
        for e in found:
            if e.metrics is None or metric not in e.metrics or not e.version_score:
                continue
            key, value = (e.model, e.model_version), e.metrics[metric]
            held = best.get(key)
            if held is None or (value > held.value if higher else value < held.value):
                best[key] = VersionScore(value, higher, e.latency_ms)
        return best

    def boards(self, principal: Principal) -> list[tuple[str, str]]:
        """(task, dataset) of every board with a score, on datasets the caller may see."""
        with self.database.transaction() as session:
            found = repo.boards(session)
        shown = []
        for task, owner, name in found:
            try:
                self.datasets.require(principal, owner, name, Permission.MODEL_READ)
            except NotFound:
                continue
            shown.append((task, f"{owner}/{name}"))
        return shown

    # ---- access
    def _sees_model(self, principal: Principal, model: Model, seen: dict[str, bool]) -> bool:
        if model.ref in seen:
            return seen[model.ref]
        visibility = model.visibility.value
        grants = (
            self.grants(principal.tenant)
            if principal.tenant is not None and needs_grants(principal, model.owner, visibility)
            else None
        )
        decision = decide_model(
            principal, Permission.MODEL_READ, model.owner, model.name, visibility, grants
        )
        seen[model.ref] = decision is Decision.ALLOW
        return seen[model.ref]

    def _sees(self, principal: Principal, evaluation: Evaluation, seen: dict[str, bool]) -> bool:
        # An endpoint evaluation names every version that served it: each must be visible.
        refs = [evaluation.model, *(s.model for s in evaluation.served if s.model)]
        return all(self._sees_ref(principal, ref, seen) for ref in refs)

    def _sees_ref(self, principal: Principal, ref: str, seen: dict[str, bool]) -> bool:
        if ref not in seen:
            owner, _, name = ref.partition("/")
            try:
                model = self.registry.get_model(owner, name)
            except NotFound:
                seen[ref] = False
            else:
                self._sees_model(principal, model, seen)
        return seen[ref]

    def _may_read(
        self, principal: Principal, evaluation: Evaluation, seen: dict[str, bool]
    ) -> bool:
        if is_operator(principal) or principal.tenant == evaluation.tenant:
            return True
        return evaluation.published and self._sees(principal, evaluation, seen)
