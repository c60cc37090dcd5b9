"""Jobs: submit work that runs in the background, follow it, list, cancel."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from modelport.client.errors import error_from_response
from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call, segment
from modelport.client.types import Job, Page, page_of


def target_of(target: str) -> dict[str, str]:
    """``owner/name[:version]`` is a model; a name without '/' an endpoint."""
    return {"model": target} if "/" in target else {"endpoint": target}


TENSOR_BATCH = (
    {"name": "shards", "implementation": "tensor_shards"},
    {"name": "publish", "implementation": "tensor_publish"},
)
"""The pipeline of a batch over a dataset split, when the caller names none (docs/batch.md)."""


def dataset_input(dataset: str | None, split: str | None) -> dict[str, str] | None:
    """The API's ``input_dataset``: ``dataset`` (``owner/name:version``) and ``split``
    come together or not at all."""
    if dataset is None and split is None:
        return None
    if dataset is None or split is None:
        raise ValueError("a dataset input needs both the dataset (owner/name:version) and a split")
    return {"dataset": dataset, "split": split}


def submit_call(
    target: str,
    inputs: Sequence[dict[str, Any]] | None = None,
    *,
    input_digest: str | None = None,
    input_dataset: str | None = None,
    split: str | None = None,
    select: Sequence[str] | None = None,
    rename: dict[str, str] | None = None,
    pipeline: Sequence[dict[str, Any]] | None = None,
    webhook: str | None = None,
    idempotency_key: str | None = None,
) -> Call[Job]:
    body: dict[str, Any] = {"target": target_of(target)}
    from_split = dataset_input(input_dataset, split)
    if from_split is not None and pipeline is None:
        pipeline = [dict(stage) for stage in TENSOR_BATCH]
    for name, value in (
        ("inputs", None if inputs is None else list(inputs)),
        ("input_digest", input_digest),
        ("input_dataset", from_split),
        ("select", None if select is None else list(select)),
        ("rename", rename),
        ("pipeline", None if pipeline is None else list(pipeline)),
        ("webhook", webhook),
    ):
        if value is not None:
            body[name] = value
    headers = {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
    return Call("POST", "/api/jobs", Job.from_json, json=body, headers=headers)


def get_call(job_id: str) -> Call[Job]:
    return Call("GET", f"/api/jobs/{segment(job_id)}", Job.from_json)


def list_call(
    state: str | None = None, target: str | None = None, cursor: str | None = None, limit: int = 50
) -> Call[Page[Job]]:
    params = {"state": state, "target": target, "cursor": cursor, "limit": limit}
    return Call("GET", "/api/jobs", page_of(Job.from_json), params=params)


def cancel_call(job_id: str) -> Call[Job]:
    return Call("POST", f"/api/jobs/{segment(job_id)}:cancel", Job.from_json)


def output_path(job: Job, digest: str | None) -> str:
    """The output route of ``digest`` (None: the job's output document)."""
    chosen = digest or job.output_digest
    if chosen is None:
        raise ValueError(f"job {job.id} has no output yet ({job.state})")
    return f"/api/jobs/{segment(job.id)}/outputs/{chosen}"


class Jobs(Family):
    """``client.jobs``."""

    def submit(
        self, target: str, inputs: Sequence[dict[str, Any]] | None = None, **options: Any
    ) -> Job:
        """Queue a job on ``target`` (a model ref, or an endpoint name) with OIP JSON
        tensors ``inputs`` (or ``input_digest=``, or a dataset split:
        ``input_dataset="owner/name:version", split="test"``, a tensor batch unless
        ``pipeline`` names another); options: ``select``, ``rename``, ``pipeline``,
        ``webhook``, ``idempotency_key``."""
        return self._t.run(submit_call(target, inputs, **options))

    def get(self, job_id: str) -> Job:
        return self._t.run(get_call(job_id))

    def list(
        self,
        *,
        state: str | None = None,
        target: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Job]:
        return self._t.run(list_call(state, target, cursor, limit))

    def cancel(self, job_id: str) -> Job:
        """Ask the job to stop at its next stage boundary."""
        return self._t.run(cancel_call(job_id))

    def output(self, job_id: str, digest: str | None = None) -> bytes:
        """Download one of the job's outputs with this client's key: ``digest`` (a
        shard a batch manifest lists), or by default the job's output document."""
        path = output_path(self.get(job_id), digest)
        response = self._t.send("GET", path)
        if not response.is_success:
            raise error_from_response(response)
        return response.content

    def wait(
        self,
        job_id: str,
        *,
        timeout: float = 3600.0,
        interval: float = 0.5,
        progress: Callable[[Job], object] | None = None,
    ) -> Job:
        """Poll until the job ended (``progress`` sees each state); ``TimeoutError``
        after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if progress is not None:
                progress(job)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job.state}")
            time.sleep(interval)


class AsyncJobs(AsyncFamily):
    async def submit(
        self, target: str, inputs: Sequence[dict[str, Any]] | None = None, **options: Any
    ) -> Job:
        return await self._t.run(submit_call(target, inputs, **options))

    async def get(self, job_id: str) -> Job:
        return await self._t.run(get_call(job_id))

    async def list(
        self,
        *,
        state: str | None = None,
        target: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> Page[Job]:
        return await self._t.run(list_call(state, target, cursor, limit))

    async def cancel(self, job_id: str) -> Job:
        return await self._t.run(cancel_call(job_id))

    async def output(self, job_id: str, digest: str | None = None) -> bytes:
        path = output_path(await self.get(job_id), digest)
        response = await self._t.send("GET", path)
        if not response.is_success:
            raise error_from_response(response)
        return response.content

    async def wait(self, job_id: str, *, timeout: float = 3600.0, interval: float = 0.5) -> Job:
        deadline = time.monotonic() + timeout
        while True:
            job = await self.get(job_id)
            if job.finished:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job.state}")
            await asyncio.sleep(interval)
