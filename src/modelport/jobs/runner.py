"""The job runner: claims jobs under a lease and runs their stages in order.

One per serving process (``JobRunner.running`` in the API's lifespan, on the server's
event loop), or on a thread owning its own loop (``start`` / ``stop``: a process that
only runs jobs). Each claimed job is a task; at most ``concurrency`` run at once.

For each job, from the stage it is at (``Job.stage``):

1. before the stage: a cancelled job ends ``cancelled`` here (the stage boundary);
2. an attempt is counted (``attempts``) and the stage runs within its timeout, while a
   heartbeat renews the lease every third of it. A lost lease (this runner stalled past
   the expiry and another claimed the job) lets the attempt end on its own, then drops
   the job unrecorded: the other runner owns it now;
3. its output is stored in the blob store by digest, and recorded with the stage done
   and the job moved on, in one transaction: re-entering the job never runs a finished
   stage again, and a retry of a later stage reuses the finished ones' outputs;
4. a failure is retried after ``backoff * 2**(attempt-1)`` seconds while attempts are
   left and the stage and error allow (``Stage``); otherwise the job ends ``failed``
   with the stage's error.

Before the first stage runs (again when a runner resumes a job), the job's upper bound
is held once (``JobHolds``, ``jobs.billing``); a tenant that cannot cover it has its job
fail with ``budget_exceeded`` before any stage runs. The job's end gives back what the
hold has left.

The last stage's output is the job's. A job that ends calls the ``JobNotifier``.
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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, Protocol, TypeVar

import anyio.to_thread

from modelport.clock import Clock, SystemClock
from modelport.errors import ModelportError, PaymentRequired
from modelport.jobs.principals import principal_of
from modelport.jobs.queue import JobQueue
from modelport.jobs.stages import StageContext, StageRegistry, StageServices
from modelport.jobs.types import Job, JobState, StageState
from modelport.tenancy.types import Principal

_log = logging.getLogger(__name__)
T = TypeVar("T")

PERMANENT = frozenset(
    {"invalid", "not_found", "forbidden", "payment_required", "unprocessable", "conflict"}
)
"""Error kinds no retry can change: the job fails at once."""


class JobNotifier(Protocol):
    """Told when a job reaches a terminal state (``jobs.notify.WebhookNotifier``). Called
    from a worker thread, after the state is committed; an error is logged."""

    def check_webhook(self, url: str) -> None:
        """Refuse, at submission, a webhook URL no notice may go to."""

    def job_finished(self, job: Job) -> None: ...


class NoNotifier:
    def check_webhook(self, url: str) -> None:
        return None

    def job_finished(self, job: Job) -> None:
        return None


class JobHolds(Protocol):
    """A job's upfront hold (``jobs.billing.JobBilling``): ``open`` before its first
    stage runs, on every runner that runs it (it holds once); ``close`` once it ended."""

    async def open(self, job: Job, principal: Principal) -> None:
        """Hold the job's upper bound, or raise ``PaymentRequired``."""

    async def close(self, job_id: str) -> None: ...


class _LeaseLost(Exception):
    pass


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
    ) -> None:
        self.queue = queue
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
        self._tasks: dict[str, asyncio.Task[None]] = {}
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
        room = self.concurrency - len(self._tasks)
        if room <= 0:
            return []
        claimed = await anyio.to_thread.run_sync(self.queue.claim, self.owner, room)
        for job_id in claimed:
            task = asyncio.create_task(self._run_job(job_id), name=f"job-{job_id}")
            task.add_done_callback(lambda _: self.kick())
            self._tasks[job_id] = task
        return claimed

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
            if self._release:
                try:
                    await anyio.to_thread.run_sync(self.queue.release, job_id, self.owner)
                except Exception:
                    _log.exception("releasing job %s failed", job_id)
        self._tasks.clear()

    # ---- one job
    async def _run_job(self, job_id: str) -> None:
        try:
            await self._stages_of(job_id)
        except (_LeaseLost, asyncio.CancelledError):
            return  # another runner has it, or this one stops: the lease says what next
        except Exception:
            _log.exception("job %s: runner error", job_id)

    async def _stages_of(self, job_id: str) -> None:
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
                await self._finish(job, JobState.FAILED, error=(exc.code, str(exc)))
                return
        for position in range(job.stage, len(job.pipeline)):
            job = await self._get(job_id)
            if job.cancel_requested:
                await self._finish(job, JobState.CANCELLED)
                return
            if job.stages[position].state is StageState.DONE:  # recorded by a lost runner
                last = job.stages[position].output_digest or last
                continue
            spec = job.pipeline[position]
            stage = self.stages.get(spec.implementation)
            if stage is None:
                error = ("unknown_stage", f"no stage implementation '{spec.implementation}'")
                await self._finish(job, JobState.FAILED, error=error, failed_stage=position)
                return
            while True:
                started = await anyio.to_thread.run_sync(
                    self.queue.stage_started, job_id, position, self.owner
                )
                if started is None:
                    raise _LeaseLost
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
                )
                try:
                    output = await self._attempt(job_id, stage.run(context), spec.timeout_seconds)
                    digest = await anyio.to_thread.run_sync(
                        partial(self.services.blobs.put, output, tenant=job.tenant)
                    )
                except _LeaseLost:
                    raise
                except asyncio.CancelledError:
                    if self._stopping and self._release:
                        # Stopping cleanly: the attempt's call was settled as cancelled,
                        # so the next attempt needs a new call id. (A runner that dies
                        # records nothing: the next attempt reuses the id.)
                        await _shielded(
                            partial(
                                self.queue.stage_failed,
                                job_id,
                                position,
                                self.owner,
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
                            job, JobState.FAILED, error=(code, message), failed_stage=position
                        )
                        return
                    recorded = await anyio.to_thread.run_sync(
                        self.queue.stage_failed, job_id, position, self.owner, code, message
                    )
                    if not recorded:
                        raise _LeaseLost from exc
                    await self._attempt(
                        job_id, self.clock.sleep(spec.backoff_seconds * 2 ** (attempt - 1)), None
                    )
                    continue
                done = await anyio.to_thread.run_sync(
                    self.queue.stage_done, job_id, position, self.owner, digest
                )
                if not done:
                    raise _LeaseLost
                outputs[spec.name] = last = digest
                break
        job = await self._get(job_id)
        await self._finish(job, JobState.SUCCEEDED, output_digest=last)

    async def _attempt(self, job_id: str, work: Awaitable[T], timeout: float | None) -> T:
        """Await ``work`` within ``timeout`` while the lease is renewed. A lost lease
        lets it end on its own (within the timeout: a metered call in flight settles as
        it ends, not cancelled, so the runner that took the job over, running the same
        call id, is charged once), then drops it (``_LeaseLost``)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        task: asyncio.Future[T] = asyncio.ensure_future(work)
        beat = asyncio.create_task(self._heartbeat(job_id))
        try:
            both: set[asyncio.Future[Any]] = {task, beat}
            done, _ = await asyncio.wait(both, timeout=timeout, return_when="FIRST_COMPLETED")
            if beat in done:
                if task not in done:
                    left = None if deadline is None else max(0.0, deadline - loop.time())
                    await asyncio.wait({task}, timeout=left)
                raise _LeaseLost
            if task in done:
                return task.result()
            raise TimeoutError
        finally:
            beat.cancel()
            if not task.done():
                task.cancel()
            with suppress(BaseException):
                await task

    async def _heartbeat(self, job_id: str) -> None:
        """Renew the lease every third of it; return when it was lost."""
        while True:
            await asyncio.sleep(self.queue.lease_seconds / 3)
            held, _ = await anyio.to_thread.run_sync(self.queue.renew, job_id, self.owner)
            if not held:
                return

    async def _get(self, job_id: str) -> Job:
        job = await anyio.to_thread.run_sync(self.queue.get, job_id)
        if job is None:
            raise _LeaseLost  # removed
        return job

    async def _finish(
        self,
        job: Job,
        state: JobState,
        *,
        output_digest: str | None = None,
        error: tuple[str, str] | None = None,
        failed_stage: int | None = None,
    ) -> None:
        ended = await anyio.to_thread.run_sync(
            lambda: self.queue.finish(
                job.id,
                self.owner,
                state,
                output_digest=output_digest,
                error=error,
                failed_stage=failed_stage,
            )
        )
        if not ended:
            raise _LeaseLost
        if self.holds is not None:
            try:
                await self.holds.close(job.id)
            except Exception:  # the hold expires on its own (``Reservations.sweep``)
                _log.exception("job %s: giving its hold back failed", job.id)
        await notify(self.queue, self.notifier, job.id)


async def notify(queue: JobQueue, notifier: JobNotifier, job_id: str) -> None:
    """Tell ``notifier`` the job ended (its stored state); an error is logged."""
    try:
        final = await anyio.to_thread.run_sync(queue.get, job_id)
        if final is not None:
            await anyio.to_thread.run_sync(notifier.job_finished, final)
    except Exception:
        _log.exception("notifying the end of job %s failed", job_id)


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
