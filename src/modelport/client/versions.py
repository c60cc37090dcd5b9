"""Versions: publish, read, move through the lifecycle, the validation report, and
loading into (or out of) the serving host."""

from __future__ import annotations

import asyncio
import builtins
import time
from typing import Any

from modelport.client import jobs as job_calls
from modelport.client.errors import ApiError, Conflict, InvalidRequest, ServerError
from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call, model_path, segment, split_model, version_path
from modelport.client.types import (
    Job,
    Json,
    LoadStatus,
    Transition,
    Unloaded,
    ValidationReport,
    Version,
    items_of,
)


def _split_ref(ref: str) -> tuple[str, str | None]:
    model, _, version = ref.partition(":")
    return model, version or None


def list_call(model: str) -> Call[list[Version]]:
    return Call("GET", f"{model_path(model)}/versions", items_of(Version.from_json))


def get_call(ref: str) -> Call[Version]:
    return Call("GET", version_path(ref), Version.from_json)


def publish_call(model: str, version: str, manifest: dict[str, Any]) -> Call[Version]:
    body = {"version": version, "manifest": manifest}
    return Call("POST", f"{model_path(model)}/versions", Version.from_json, json=body)


VALIDATION_WAIT = 900.0
"""Seconds a transition waits for its answer: ``validated`` loads and runs the model
first, which takes minutes for a large one."""


def transition_call(ref: str, to: str, reason: str = "") -> Call[Transition]:
    body = {"to": to, "reason": reason}
    path = f"{version_path(ref)}/transitions"
    return Call("POST", path, Transition.from_json, json=body, timeout=VALIDATION_WAIT)


POLL_SECONDS = 1.0
"""How often a transition answered 202 (its validation still running) polls its job."""


def ended_transition(job: Job, report: ValidationReport | None) -> Transition:
    """A validation job's end as the transition would have answered it: its event, or
    the error (``report``: the version's latest, for a failed validation)."""
    result = job.raw.get("result")
    if job.state == "succeeded" and isinstance(result, dict):
        return Transition.from_json({**result, "job": job.raw})
    error = job.error or {}
    code = str(error.get("code") or f"validation_{job.state}")
    detail = str(error.get("message") or f"the validation job {job.id} ended {job.state}")
    body: dict[str, Any] = {"code": code, "detail": detail, "job": job.id}
    failure: type[ApiError]
    if code == "validation_failed":
        status, failure = 422, InvalidRequest
        if report is not None:
            body["report"] = report.report
    elif code in ("illegal_transition", "validation_cancelled") or job.state == "cancelled":
        status, failure = 409, Conflict
    else:
        status, failure = 500, ServerError
    raise failure(status, code, detail, body | {"status": status})


def validation_call(ref: str) -> Call[ValidationReport]:
    return Call("GET", f"{version_path(ref)}/validation", ValidationReport.from_json)


def events_call(ref: str) -> Call[list[Json]]:
    return Call("GET", f"{version_path(ref)}/events", lambda body: list(body["items"]))


def _repository(ref: str, verb: str) -> tuple[str, dict[str, Any]]:
    model, version = _split_ref(ref)
    owner, name = split_model(model)
    parameters: dict[str, Any] = {} if version is None else {"version": version}
    return f"/v2/repository/models/{segment(owner)}/{segment(name)}/{verb}", parameters


def load_call(ref: str, *, pinned: bool = False) -> Call[LoadStatus]:
    path, parameters = _repository(ref, "load")
    if pinned:
        parameters["pinned"] = True
    return Call("POST", path, LoadStatus.from_json, json={"parameters": parameters})


def unload_call(ref: str) -> Call[Unloaded]:
    path, parameters = _repository(ref, "unload")
    return Call("POST", path, Unloaded.from_json, json={"parameters": parameters})


class Versions(Family):
    """``client.versions``: refs are ``owner/name:version``."""

    def list(self, model: str) -> list[Version]:
        """The versions of ``owner/name``, oldest first (without manifests)."""
        return self._t.run(list_call(model))

    def get(self, ref: str) -> Version:
        return self._t.run(get_call(ref))

    def publish(self, model: str, version: str, manifest: dict[str, Any]) -> Version:
        """Publish ``manifest`` (its files uploaded first) as an immutable version."""
        return self._t.run(publish_call(model, version, manifest))

    def transition(self, ref: str, to: str, reason: str = "") -> Transition:
        """Move a version to state ``to``; ``validated`` runs the validation first (a
        failed one raises ``InvalidRequest`` ``validation_failed``: read
        ``validation(ref)`` for why). A validation the server answered as a job still
        running (202) is followed here until it ends."""
        answer = self._t.run(transition_call(ref, to, reason))
        if not answer.pending or answer.job is None:
            return answer
        deadline = time.monotonic() + VALIDATION_WAIT
        job = self._t.run(job_calls.get_call(answer.job))
        while not job.finished:
            if time.monotonic() > deadline:
                raise TimeoutError(f"validation job {job.id} still {job.state}")
            time.sleep(POLL_SECONDS)
            job = self._t.run(job_calls.get_call(answer.job))
        failed = (job.error or {}).get("code") == "validation_failed"
        return ended_transition(job, self.validation(ref) if failed else None)

    def validation(self, ref: str) -> ValidationReport:
        """The latest validation report (``problems``: why it failed)."""
        return self._t.run(validation_call(ref))

    def events(self, ref: str) -> builtins.list[Json]:
        return self._t.run(events_call(ref))

    def load(self, ref: str, *, pinned: bool = False) -> LoadStatus:
        """Load ``owner/name:V`` (``owner/name``: its default version) into the serving
        host; returns once it is ready."""
        return self._t.run(load_call(ref, pinned=pinned))

    def unload(self, ref: str) -> Unloaded:
        """Unload ``owner/name:V``, or every loaded version of ``owner/name``."""
        return self._t.run(unload_call(ref))


class AsyncVersions(AsyncFamily):
    async def list(self, model: str) -> list[Version]:
        return await self._t.run(list_call(model))

    async def get(self, ref: str) -> Version:
        return await self._t.run(get_call(ref))

    async def publish(self, model: str, version: str, manifest: dict[str, Any]) -> Version:
        return await self._t.run(publish_call(model, version, manifest))

    async def transition(self, ref: str, to: str, reason: str = "") -> Transition:
        answer = await self._t.run(transition_call(ref, to, reason))
        if not answer.pending or answer.job is None:
            return answer
        deadline = time.monotonic() + VALIDATION_WAIT
        job = await self._t.run(job_calls.get_call(answer.job))
        while not job.finished:
            if time.monotonic() > deadline:
                raise TimeoutError(f"validation job {job.id} still {job.state}")
            await asyncio.sleep(POLL_SECONDS)
            job = await self._t.run(job_calls.get_call(answer.job))
        failed = (job.error or {}).get("code") == "validation_failed"
        return ended_transition(job, await self.validation(ref) if failed else None)

    async def validation(self, ref: str) -> ValidationReport:
        return await self._t.run(validation_call(ref))

    async def events(self, ref: str) -> builtins.list[Json]:
        return await self._t.run(events_call(ref))

    async def load(self, ref: str, *, pinned: bool = False) -> LoadStatus:
        return await self._t.run(load_call(ref, pinned=pinned))

    async def unload(self, ref: str) -> Unloaded:
        return await self._t.run(unload_call(ref))
