"""The job runner: claims jobs under a lease and runs their stages in order.

One per serving process (``JobRunner.running`` in the API's lifespan, on the server's
event loop), or on a thread owning its own loop (``start`` / ``stop``: a process that
only runs jobs). Each claimed job is a task; at most ``concurrency`` run at once. A kind of job given its own
cap (``kind_concurrency``: validations, ``jobs.validation``) is claimed apart, into its
own slots: at most its cap of it run here at once, none of them in the ``concurrency``
slots, so a queue of one kind never starves the other. A kind may also be capped across
the installation (``installation_concurrency``): then this runner claims it only while
fewer than that many run on all runners together (live leases, counted and claimed in
one decision: ``repository.claim``). A place freed elsewhere is seen at the next poll.

For each job, from the stage it is at (``Job.stage``):

1. before the stage: a cancelled job ends ``cancelled`` here (the stage boundary). A
   cancel recorded while a stage runs cancels the attempt's ``StageContext.cancel``
   (at once from this process's ``JobService``, ``cancel_requested``; at the next
   renewal from another's): a stage that watches it (validation: its sandboxed child
   killed) stops and raises ``Cancelled``, having recorded nothing, and the job ends
   ``cancelled`` there; any other stage runs to its end, and the job stops at the
   boundary;
2. an attempt is counted (``attempts``) and the stage runs within its timeout, while a
   heartbeat renews the lease every third of it (on the injected clock). Every write
   carries the lease's generation (``Lease``, the fencing token): once another claim
   took the job (this runner stalled past the expiry), the next renewal or write is
   refused, and the attempt in flight is cancelled there and then and the job dropped
   unrecorded: the other runner owns it now. A heartbeat that cannot reach the database
   for a whole lease gives the job up the same way (its lease has expired by then);
3. its output is stored in the blob store by digest, on a worker thread and within the
   attempt (the heartbeat goes on; a ``StreamedOutput`` is encoded and written piece by
   piece there, ``store_output``), and recorded with the stage done and the job moved
   on, in one transaction: re-entering the job never runs a finished stage again, and a
   retry of a later stage reuses the finished ones' outputs;
4. a failure is retried after ``backoff * 2**(attempt-1)`` seconds while attempts are
   left and the stage and error allow (``Stage``); otherwise the job ends ``failed``
   with the stage's error.

Before the first stage runs (again when a runner resumes a job), the job's upper bound
is held once (``JobHolds``, ``jobs.billing``); a tenant that cannot cover it has its job
fail with ``budget_exceeded`` before any stage runs. The job's end gives back what the
hold has left.

The last stage's output is the job's. A job's end calls the ``JobNotifier`` inside the
transaction that records it (its webhook's delivery is an outbox row of that commit).
A runner that dies leaves its leases to expire; ``stop(release=False)`` behaves the
same, for tests. ``stop()`` gives its leases back at once, recording the attempts it
interrupted as closed (their metered calls were settled cancelled: the next attempt
takes a new call id, see ``stages.call_id``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, Protocol, TypeVar

import anyio.to_thread
from opentelemetry.trace import SpanKind, Tracer
from sqlalchemy.orm import Session

from modelport.blobs.service import BlobService
from modelport.clock import Clock, SystemClock
from modelport.errors import ModelportError, PaymentRequired
from modelport.jobs.principals import principal_of
from modelport.jobs.queue import JobQueue
from modelport.jobs.stages import Stage, StageContext, StageRegistry, StageServices
from modelport.jobs.types import Job, JobState, Lease, LeaseLost, StageState, StreamedOutput
from modelport.observability import tracing
from modelport.sandbox.cancel import Cancellation, Cancelled
from modelport.tenancy.types import Principal

_log = logging.getLogger(__name__)
T = TypeVar("T")

PERMANENT = frozenset(
    {"invalid", "not_found", "forbidden", "payment_required", "unprocessable", "conflict"}
)
"""Error kinds no retry can change: the job fails at once."""


class JobNotifier(Protocol):
    """Told when a job reaches a terminal state (``jobs.notify.WebhookNotifier``).

    ``check_webhook`` at submission; ``job_finished`` from a worker thread, inside the
    transaction that ends the job (what it records commits with the end, or neither
    does: an error rolls the end back); ``wake`` once that committed."""

    def check_webhook(self, url: str) -> None:
        """Refuse, at submission, a webhook URL no notice may go to."""

    def job_finished(self, session: Session, job: Job) -> None:
        """Record the notice of ``job``'s end (an outbox row) in ``session``: database
        writes only, no network."""

    def wake(self) -> None:
        """The end committed: send what ``job_finished`` recorded now."""


class NoNotifier:
    def check_webhook(self, url: str) -> None:
        return None

    def job_finished(self, session: Session, job: Job) -> None:
        return None

    def wake(self) -> None:
        return None


class JobHolds(Protocol):
    """A job's upfront hold (``jobs.billing.JobBilling``): ``open`` before its first
    stage runs, on every runner that runs it (it holds once); ``close`` once it ended."""

    async def open(self, job: Job, principal: Principal) -> None:
        """Hold the job's upper bound, or raise ``PaymentRequired``."""

    async def close(self, job_id: str) -> None: ...


class JobObserver(Protocol):
    """Told each ended job: its endpoint (empty for a version), end state and seconds
    from submission to end (``observability.slo_metrics.SLIMetrics``)."""

    def job_ended(self, endpoint: str, state: str, seconds: float) -> None: ...


class JobRunner:
    """Claims and runs jobs (see the module docstring)."""

    def __init__(
        self,
        queue: JobQueue,
        stages: StageRegistry,
        services: StageServices,
        *,
        concurrency: int = 4,
        poll_seconds: float = 1.0,
        clock: Clock | None = None,
        notifier: JobNotifier | None = None,
        owner: str | None = None,
        holds: JobHolds | None = None,
        kind_concurrency: Mapping[str, int] | None = None,
        installation_concurrency: Mapping[str, int] | None = None,
        tracer: Tracer | None = None,
        observer: JobObserver | None = None,
    ) -> None:
        self.queue = queue
        self.observer = observer
        """Told each job this runner ended, with its time from submission (its SLO's
        event)."""
        self.tracer = tracer
        """With tracing on: a ``job`` span per run of a job, continuing the submitting
        request's trace (``Job.trace_context``), and a ``stage`` span per attempt."""
        self.stages = stages
        self.services = services
        self.concurrency = concurrency
        self.poll_seconds = poll_seconds
        self.clock = clock or SystemClock()
        self.notifier: JobNotifier = notifier or NoNotifier()
        self.owner = owner or uuid.uuid4().hex
        """This runner's lease owner id."""
        self.holds = holds
        """None: no upfront hold (each metered call holds for itself)."""
        self.kind_concurrency = dict(kind_concurrency or {})
        """Target kinds claimed apart, each with its own cap here (0: none run here)."""
        self.installation_concurrency = dict(installation_concurrency or {})
        """Of those kinds, the ones capped across the installation too: claimed only
        while fewer than this many run on every runner together."""
        self.ended: list[Callable[[str], None]] = []
        """Told (from the event loop) each job id this runner ended, once that
        committed: waiters in this process need not poll for it."""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._kinds: dict[str, str | None] = {}
        """The capped kind each task was claimed as (None: the general slots)."""
        self._leases: dict[str, Lease] = {}
        """The lease each task runs under (a clean stop gives it back)."""
        self._cancels: dict[str, Cancellation] = {}
        """The cancellation of each stage attempt in flight, by job id."""
        self._wakers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        """One per ``run`` in progress (an application may run its lifespan on several
        event loops, as test clients do): ``kick`` wakes each on its own loop."""
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._release = True

    # ---- lifecycle
    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run on the current event loop for the block's duration (the API lifespan)."""
        self._stopping, self._release = False, True
        main = asyncio.create_task(self.run())
        try:
            yield
        finally:
            self._stopping = True
            self.kick()
            await main

    def start(self) -> None:
        """Run on a thread owning its own event loop."""
        if self._thread is not None:
            return
        self._stopping, self._release = False, True
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self.run()), name="job-runner", daemon=True
        )
        self._thread.start()

    def stop(self, *, release: bool = True, timeout: float = 30.0) -> None:
        """Stop the thread ``start`` began; ``release=False`` keeps the leases (as a
        runner that died would: another runner resumes the jobs once they expire)."""
        self._release = release
        self._stopping = True
        self.kick()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)

    def busy(self) -> bool:
        """Whether a job is running here now."""
        return any(not task.done() for task in list(self._tasks.values()))

    def cancel_requested(self, job_id: str) -> None:
        """A cancel of ``job_id`` was recorded: if a stage of it runs here now, its
        attempt's cancellation is cancelled at once (a stage that watches it stops
        there). Safe from any thread; a runner elsewhere learns it at its next renewal."""
        cancel = self._cancels.get(job_id)
        if cancel is not None:
            cancel.cancel()

    def kick(self) -> None:
        """Look for work now (a job was submitted). Safe from any thread."""
        for loop, wake in list(self._wakers):
            with suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(wake.set)

    async def run(self) -> None:
        """Claim and run jobs until stopped."""
        waker = (asyncio.get_running_loop(), asyncio.Event())
        self._wakers.append(waker)
        wake = waker[1]
        try:
            while not self._stopping:
                try:
                    await self.claim_once()
                except Exception:
                    _log.exception("claiming jobs failed")
                with suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), self.poll_seconds)
                wake.clear()
        finally:
            self._wakers.remove(waker)
            await self._shutdown()

    async def claim_once(self) -> list[str]:
        """Claim what there is room for and start it; the ids claimed."""
        self._tasks = {k: t for k, t in self._tasks.items() if not t.done()}
        self._leases = {k: lease for k, lease in self._leases.items() if k in self._tasks}
        self._kinds = {k: kind for k, kind in self._kinds.items() if k in self._tasks}
        ids: list[str] = []
        capped = sorted(self.kind_concurrency)
        slots: list[tuple[str | None, int]] = [(None, self.concurrency)]
        slots += [(kind, self.kind_concurrency[kind]) for kind in capped]
        for kind, cap in slots:
            room = cap - sum(1 for taken in self._kinds.values() if taken == kind)
            if room <= 0:
                continue
            if kind is None:
                claim = partial(self.queue.claim, self.owner, room, exclude=capped)
            else:
                claim = partial(
                    self.queue.claim,
                    self.owner,
                    room,
                    kinds=(kind,),
                    running_cap=self.installation_concurrency.get(kind),
                )
            for lease in await anyio.to_thread.run_sync(claim):
                task = asyncio.create_task(self._run_job(lease), name=f"job-{lease.job_id}")
                task.add_done_callback(lambda _: self.kick())
                self._tasks[lease.job_id] = task
                self._leases[lease.job_id] = lease
                self._kinds[lease.job_id] = kind
                ids.append(lease.job_id)
        return ids

    async def drain(self) -> None:
        """Claim and run until nothing is claimable and nothing runs (tests)."""
        while True:
            await self.claim_once()
            running = [t for t in self._tasks.values() if not t.done()]
            if not running:
                return
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)

    async def _shutdown(self) -> None:
        tasks = list(self._tasks.items())
        for _, task in tasks:
            task.cancel()
        for job_id, task in tasks:
            with suppress(BaseException):
                await task
            lease = self._leases.get(job_id)
            if self._release and lease is not None:
                try:
                    await anyio.to_thread.run_sync(self.queue.release, lease)
                except Exception:
                    _log.exception("releasing job %s failed", job_id)
        self._tasks.clear()
        self._leases.clear()
        self._kinds.clear()

    # ---- one job
    async def _run_job(self, lease: Lease) -> None:
        try:
            if self.tracer is None:
                await self._stages_of(lease)
            else:
                job = await self._get(lease.job_id)
                with tracing.span_under(
                    self.tracer,
                    "job",
                    tracing.context_of(job.trace_context),
                    kind=SpanKind.CONSUMER,
                    attributes={tracing.JOB_ID: job.id, "modelport.job.target": job.target},
                ):
                    await self._stages_of(lease)
        except LeaseLost:
            _log.warning("job %s: lease %d lost; another runner has it", *_lease(lease))
        except asyncio.CancelledError:
            return  # this runner stops: the lease says what next
        except Exception:
            _log.exception("job %s: runner error", lease.job_id)

    async def _stages_of(self, lease: Lease) -> None:
        job_id = lease.job_id
        job = await self._get(job_id)
        principal = principal_of(job.principal)
        outputs = {run.name: run.output_digest for run in job.stages if run.output_digest}
        last = job.input_digest
        for run in job.stages[: job.stage]:
            last = run.output_digest or last
        if self.holds is not None and not job.cancel_requested:
            try:
                await self.holds.open(job, principal)
            except PaymentRequired as exc:
                await self._finish(lease, JobState.FAILED, error=(exc.code, str(exc)))
                return
        for position in range(job.stage, len(job.pipeline)):
            job = await self._get(job_id)
            if job.cancel_requested:
                await self._finish(lease, JobState.CANCELLED)
                return
            if job.stages[position].state is StageState.DONE:  # recorded by a lost runner
                last = job.stages[position].output_digest or last
                continue
            spec = job.pipeline[position]
            stage = self.stages.get(spec.implementation)
            if stage is None:
                error = ("unknown_stage", f"no stage implementation '{spec.implementation}'")
                await self._finish(lease, JobState.FAILED, error=error, failed_stage=position)
                return
            while True:
                started = await anyio.to_thread.run_sync(self.queue.stage_started, lease, position)
                if started is None:
                    raise LeaseLost
                attempt, closed = started
                context = StageContext(
                    job=job,
                    spec=spec,
                    position=position,
                    attempt=attempt,
                    closed_attempts=closed,
                    principal=principal,
                    input_digest=last,
                    outputs=dict(outputs),
                    services=self.services,
                    lease=lease,
                )
                self._cancels[job_id] = context.cancel
                try:
                    if (await self._get(job_id)).cancel_requested:
                        context.cancel.cancel()  # asked for before it could be seen here
                    digest = await self._attempt(
                        lease, self._produce(stage, context), spec.timeout_seconds, context.cancel
                    )
                except LeaseLost:
                    raise
                except Cancelled:
                    # The stage stopped for the job's cancel and recorded nothing.
                    await _shielded(
                        partial(
                            self.queue.stage_failed,
                            lease,
                            position,
                            "cancelled",
                            "the job was cancelled during this attempt",
                        )
                    )
                    await self._finish(lease, JobState.CANCELLED, failed_stage=position)
                    return
                except asyncio.CancelledError:
                    if self._stopping and self._release:
                        # Stopping cleanly: the attempt's call was settled as cancelled,
                        # so the next attempt needs a new call id. (A runner that dies
                        # records nothing: the next attempt reuses the id.)
                        await _shielded(
                            partial(
                                self.queue.stage_failed,
                                lease,
                                position,
                                "interrupted",
                                "the runner stopped during this attempt",
                            )
                        )
                    raise
                except Exception as exc:
                    code, message = _error(exc, spec.timeout_seconds)
                    permanent = isinstance(exc, ModelportError) and exc.kind in PERMANENT
                    if permanent or not spec.retryable or attempt > spec.retries:
                        await self._finish(
                            lease, JobState.FAILED, error=(code, message), failed_stage=position
                        )
                        return
                    recorded = await anyio.to_thread.run_sync(
                        self.queue.stage_failed, lease, position, code, message
                    )
                    if not recorded:
                        raise LeaseLost from exc
                    await self._attempt(
                        lease, self.clock.sleep(spec.backoff_seconds * 2 ** (attempt - 1)), None
                    )
                    continue
                finally:
                    self._cancels.pop(job_id, None)
                done = await anyio.to_thread.run_sync(
                    self.queue.stage_done, lease, position, digest
                )
                if not done:
                    raise LeaseLost
                outputs[spec.name] = last = digest
                break
        await self._finish(lease, JobState.SUCCEEDED, output_digest=last)

    async def _produce(self, stage: Stage, context: StageContext) -> str:
        """Run the stage and store its output: the digest. Both happen inside the
        attempt, so the lease is renewed while a big output is written too."""
        if self.tracer is None:
            output = await stage.run(context)
            return await store_output(self.services.blobs, output, tenant=context.job.tenant)
        attributes: dict[str, str | int] = {
            tracing.JOB_ID: context.job.id,
            "modelport.job.stage": context.spec.name,
            "modelport.job.attempt": context.attempt,
        }
        with tracing.span_under(self.tracer, "stage", attributes=attributes):
            output = await stage.run(context)
            return await store_output(self.services.blobs, output, tenant=context.job.tenant)

    async def _attempt(
        self,
        lease: Lease,
        work: Awaitable[T],
        timeout: float | None,
        cancel: Cancellation | None = None,
    ) -> T:
        """Await ``work`` within ``timeout`` while the lease is renewed. A lost lease
        cancels it at once (``LeaseLost``): another runner owns the job now and runs
        this stage itself, so this attempt must not run on beside it (its metered call,
        if any, settles ``cancelled``). A renewal that finds the job's cancel requested
        cancels ``cancel``."""
        task: asyncio.Future[T] = asyncio.ensure_future(work)
        beat = asyncio.create_task(self._heartbeat(lease, cancel))
        try:
            both: set[asyncio.Future[Any]] = {task, beat}
            done, _ = await asyncio.wait(both, timeout=timeout, return_when="FIRST_COMPLETED")
            if task in done:
                return task.result()
            if beat in done:
                raise LeaseLost
            raise TimeoutError
        finally:
            beat.cancel()
            if not task.done():
                task.cancel()
            with suppress(BaseException):
                await task

    async def _heartbeat(self, lease: Lease, cancel: Cancellation | None = None) -> None:
        """Renew the lease every third of it; return once it is lost: refused (another
        claim took the job), or not renewed for a whole lease (the database unreachable:
        the lease has expired by then, and another runner may claim the job). A renewal
        that finds the job's cancel requested (by another process) cancels ``cancel``."""
        failures = 0
        while True:
            await self.clock.sleep(self.queue.lease_seconds / 3)
            try:
                held, cancelled = await anyio.to_thread.run_sync(self.queue.renew, lease)
            except Exception:
                failures += 1
                _log.warning("job %s: renewing lease %d failed", *_lease(lease), exc_info=True)
                if failures >= 3:
                    return
                continue
            if not held:
                return
            if cancelled and cancel is not None and not cancel.cancelled:
                await anyio.to_thread.run_sync(cancel.cancel)
            failures = 0

    async def _get(self, job_id: str) -> Job:
        job = await anyio.to_thread.run_sync(self.queue.get, job_id)
        if job is None:
            raise LeaseLost  # removed
        return job

    async def _finish(
        self,
        lease: Lease,
        state: JobState,
        *,
        output_digest: str | None = None,
        error: tuple[str, str] | None = None,
        failed_stage: int | None = None,
    ) -> None:
        """End the job under ``lease``, its notice recorded in the same transaction.
        A runner stopping meanwhile waits for the end to complete, hold given back
        included, rather than leave the caller's money held until the sweep."""
        ending = asyncio.ensure_future(
            self._end(
                lease,
                state,
                output_digest=output_digest,
                error=error,
                failed_stage=failed_stage,
            )
        )
        try:
            await asyncio.shield(ending)
        except asyncio.CancelledError:
            await ending
            raise

    async def _end(
        self,
        lease: Lease,
        state: JobState,
        *,
        output_digest: str | None,
        error: tuple[str, str] | None,
        failed_stage: int | None,
    ) -> None:
        ended = await anyio.to_thread.run_sync(
            lambda: self.queue.finish(
                lease.job_id,
                lease,
                state,
                output_digest=output_digest,
                error=error,
                failed_stage=failed_stage,
                on_end=self.notifier.job_finished,
            )
        )
        if ended is None:
            raise LeaseLost
        # Committed: from here a crash loses nothing (the hold expires on its own, the
        # notice is a committed outbox row the deliverer finds).
        self.notifier.wake()
        if self.observer is not None and ended.finished_at is not None:
            endpoint = ended.target if ended.target_kind == "endpoint" else ""
            seconds = (ended.finished_at - ended.created_at).total_seconds()
            self.observer.job_ended(endpoint, ended.state.value, seconds)
        for listener in list(self.ended):
            try:
                listener(lease.job_id)
            except Exception:
                _log.exception("job %s: an end listener failed", lease.job_id)
        if self.holds is not None:
            try:
                await self.holds.close(lease.job_id)
            except Exception:  # the hold expires on its own (``Reservations.sweep``)
                _log.exception("job %s: giving its hold back failed", lease.job_id)


class _Abandoned(Exception):
    """The attempt whose output was being written ended: stop writing it."""


async def store_output(blobs: BlobService, output: bytes | StreamedOutput, *, tenant: str) -> str:
    """Store a stage's output on a worker thread; its digest. A ``StreamedOutput`` is
    encoded and written a piece at a time (``BlobService.put_chunks``): memory stays
    bounded by a piece, whatever the output's size. Cancelled (the stage's timeout, a
    lost lease, the runner stopping), the writing thread stops at its next piece and what
    it staged is dropped."""
    if isinstance(output, bytes):
        return await asyncio.to_thread(blobs.put, output, tenant=tenant)
    stop = threading.Event()

    def pieces() -> Iterator[bytes]:
        for piece in output.chunks():
            if stop.is_set():
                raise _Abandoned
            yield piece

    try:
        blob = await asyncio.to_thread(blobs.put_chunks, pieces(), tenant=tenant)
    except asyncio.CancelledError:
        stop.set()
        raise
    return blob.digest


def _lease(lease: Lease) -> tuple[str, int]:
    return lease.job_id, lease.generation


async def _shielded(work: Callable[[], object]) -> None:
    """Run ``work`` in a thread to its end, even while this task is being cancelled."""
    future = asyncio.get_running_loop().run_in_executor(None, work)
    try:
        await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait({future})
    except Exception:
        _log.exception("recording an interrupted attempt failed")


def _error(exc: Exception, timeout: float) -> tuple[str, str]:
    if isinstance(exc, TimeoutError):
        return "stage_timeout", f"the stage ran past its timeout of {timeout:g} s"
    if isinstance(exc, ModelportError):
        return exc.code, str(exc)
    return "stage_error", f"{type(exc).__name__}: {exc}"
