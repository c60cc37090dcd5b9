"""The ``evaluate`` job stage: a model version (or an endpoint) run over a dataset
split, shard by shard, and its answers scored by the task's metric suite
(``evaluations.metrics``).

An endpoint evaluation calls the endpoint by its name, so its routing (traffic split,
fallback) picks the version of each shard's call, as for any caller; the versions that
answered, with their digests and rows, are recorded beside the scores.

Each shard is one ``InferenceService.infer`` call as the submitting principal, at
offline priority, metered under the call id ``eval:<job>:<shard>`` (so a stage run
again after a crash is charged once for each shard, as a tensor batch's shards are;
each call reserves for itself, as batch jobs' calls do). The split is read a shard at a
time; the answers of the scored output are kept, then scored once. A cancel stops it
between shards, recording nothing. The scores, the rows
and the measured latency (the calls' mean wall time per row) are written once to the
evaluation (``repository.record_result``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial

import anyio.to_thread
import numpy as np

from modelport.blobs.service import BlobService
from modelport.datasets.service import DatasetService
from modelport.datasets.splits import SplitRows
from modelport.errors import InvalidInput
from modelport.evaluations import metrics
from modelport.evaluations import repository as repo
from modelport.evaluations.types import Evaluation, ServedVersion
from modelport.inference.types import (
    Caller,
    EndpointTarget,
    InferenceRequest,
    InferenceResult,
    ModelTarget,
    Target,
)
from modelport.jobs import tensors
from modelport.jobs.stages import StageContext
from modelport.manifest import TensorSpec
from modelport.runtime.types import Priority
from modelport.store import Database

SHARD_ROWS = 256
"""Rows per call: small enough for any tensor model's batch, few enough calls."""


class EvaluateStage:
    """The ``evaluate`` implementation (see the module docstring); ``params.evaluation``
    names the evaluation it runs."""

    def __init__(
        self,
        database: Database,
        datasets: DatasetService,
        blobs: BlobService,
        *,
        now: Callable[[], datetime],
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``timer``: the clock the calls' latency is measured on (the services' one)."""
        self.database = database
        self.datasets = datasets
        self.blobs = blobs
        self.now = now
        self.timer = timer

    async def run(self, context: StageContext) -> bytes:
        evaluation = await anyio.to_thread.run_sync(self._evaluation, context)
        # The dataset is read as the submitter, again: a grant withdrawn since stops it.
        dataset = await anyio.to_thread.run_sync(
            self.datasets.version,
            context.principal,
            evaluation.dataset_owner,
            evaluation.dataset_name,
            evaluation.dataset_version,
        )
        manifest = dataset.manifest
        split = manifest.split(evaluation.split)
        rows = await anyio.to_thread.run_sync(SplitRows, self.blobs, manifest, split)
        features = [c.name for c in manifest.features]
        label = manifest.label.name
        # The version resolved at submission, never an alias: versions are immutable,
        # so every shard runs the digest the evaluation names. An endpoint: its routing.
        target: Target = (
            EndpointTarget(evaluation.endpoint)
            if evaluation.endpoint is not None
            else ModelTarget(
                evaluation.model_owner, evaluation.model_name, evaluation.model_version
            )
        )
        served: Counter[tuple[str, str, str]] = Counter()
        answers: list[np.ndarray] = []
        labels: list[np.ndarray] = []
        spent = 0.0
        job = context.job
        for position, start in enumerate(range(0, rows.rows, SHARD_ROWS)):
            context.cancel.check()  # a cancelled evaluation stops between shards
            shard = await anyio.to_thread.run_sync(rows.read, start, start + SHARD_ROWS)
            inputs = {name: shard[name] for name in features}

            async def decode(
                _inputs: Sequence[TensorSpec],
                _outputs: Sequence[TensorSpec],
                inputs: dict[str, np.ndarray] = inputs,
            ) -> InferenceRequest:
                return InferenceRequest(
                    inputs=inputs,
                    outputs=(evaluation.output,),
                    timeout=context.spec.timeout_seconds,
                    priority=Priority.OFFLINE,
                )

            caller = Caller(
                context.principal, request_id=job.id, call_id=f"eval:{job.id}:{position}"
            )
            began = self.timer()
            result = await context.services.inference.infer(caller, target, decode)
            spent += self.timer() - began
            assert isinstance(result, InferenceResult)  # no idempotency key: never a replay
            if evaluation.endpoint is not None:
                served[_served_by(result)] += len(shard[label])
            answers.append(np.asarray(result.outputs[evaluation.output]))
            labels.append(shard[label])
        outputs = np.concatenate(answers)
        truth = np.concatenate(labels)
        scores = await anyio.to_thread.run_sync(metrics.score, evaluation.task, truth, outputs)
        latency_ms = 1000.0 * spent / rows.rows
        versions = tuple(
            ServedVersion(model, version, digest, count)
            for (model, version, digest), count in sorted(
                served.items(), key=lambda kv: (-kv[1], kv[0])
            )
        )
        context.cancel.settle()  # from here the scores are written whole
        await anyio.to_thread.run_sync(
            partial(self._record, evaluation.id, scores, rows.rows, latency_ms, versions)
        )
        return tensors.dumps(
            {
                "evaluation": evaluation.id,
                "metrics": scores,
                "rows": rows.rows,
                "latency_ms": latency_ms,
                "served": [v.to_doc() for v in versions],
            }
        )

    def _evaluation(self, context: StageContext) -> Evaluation:
        evaluation_id = context.spec.params.get("evaluation")
        with self.database.transaction() as session:
            found = repo.get(session, str(evaluation_id))
        if found is None or found.job_id not in (None, context.job.id):
            raise InvalidInput("the evaluate stage runs evaluations only", code="invalid_job_input")
        return found

    def _record(
        self,
        evaluation_id: str,
        scores: dict[str, float],
        rows: int,
        latency: float,
        served: tuple[ServedVersion, ...],
    ) -> None:
        with self.database.transaction() as session:
            repo.record_result(
                session,
                evaluation_id,
                metrics=scores,
                rows=rows,
                latency_ms=latency,
                at=self.now(),
                served=served,
            )


def _served_by(result: InferenceResult) -> tuple[str, str, str]:
    """(``owner/name``, version, digest) of the version that answered an endpoint call;
    empty for the endpoint's static answer (no version ran)."""
    ran = None if result.prediction is None else result.prediction.version
    return ("", "", "") if ran is None else (ran.model, ran.version, ran.manifest_digest)
