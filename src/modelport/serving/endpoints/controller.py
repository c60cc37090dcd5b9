"""The deployment controller: loads a deployment's versions, switches traffic when they
are all ready, steps canaries, closes rollback windows.

It runs as tasks on one event loop, between ``start()`` and ``stop()``; every wait
goes through the injected ``Clock``, so tests drive a staged rollout by advancing a
``ManualClock`` instead of sleeping. State lives in the database (through
``EndpointService``); after each change the controller rebuilds the changed
endpoint's route and swaps it into the router. A watch task also rebuilds every
route when the database's revision mark moves (a change made by another process),
checked every ``refresh_seconds`` and at once when a change event arrives (``nudge``).

Rolling out a deployment:

1. every version it holds (traffic, shadow, fallback) is placed (``Placement``: loaded
   on the local model host), pinned, each through its phases fetch → verify → load → warm-up; the progress is
   recorded as each one finishes;
2. a version that fails fails the deployment (traffic never moved) and versions no
   live deployment holds are unloaded again;
3. all ready: one transaction makes it active and the active one superseded (kept warm
   until the rollback window closes), then the route is swapped in one assignment.

A canary then starts at its first step; every ``check_seconds`` the judge compares the
candidate with the stable version on this step's traffic; bad: all traffic goes back to
the stable version (``halted``); good at the end of ``interval_seconds``: next step;
the step at 100 completes it.

Started again after a restart, it picks up pending deployments, running canaries and
open rollback windows, and warms the active deployments' versions; on every refresh
tick it does the same for what changed since (``_follow``), whichever process changed
it, and unloads the versions of deployments that stopped serving. Every process
does (workers, gateways), so several controllers may drive one canary: each reads
the stored rollout before it judges, and each move is guarded in its transaction (a
step only from the step it judged; a halt only while the canary progresses), so every
move is made once, by whichever controller decides first, and a halted or complete
canary is never moved again. Activations and closing rollback windows are guarded by
the deployment's state the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar, TypeVarTuple

import anyio.to_thread

from modelport.background.loops import BackgroundTask
from modelport.clock import Clock
from modelport.errors import ModelportError
from modelport.logs import log_event
from modelport.runtime.types import VersionStatus
from modelport.serving.endpoints.rollout import Verdict, judge
from modelport.serving.endpoints.service import LIVE, EndpointService
from modelport.serving.endpoints.spec import canary_weights
from modelport.serving.endpoints.types import (
    Deployment,
    DeploymentState,
    Rollout,
    RolloutKind,
    RolloutStatus,
    VersionProgress,
)
from modelport.serving.placement import Placement
from modelport.serving.routing.router import Router
from modelport.serving.types import VersionRef

log = logging.getLogger(__name__)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


def progress_of(
    ref: VersionRef, status: VersionStatus | None, error: str | None = None
) -> VersionProgress:
    if error is not None:
        return VersionProgress(ref=ref.ref, state="failed", cause=error)
    if status is None:
        return VersionProgress(ref=ref.ref, state="pending")
    return VersionProgress(
        ref=ref.ref,
        state=status.state.value,
        phases=dict(status.phases),
        cause=status.cause,
        memory_bytes=status.host_memory_bytes,
        warm_up=status.warm_up,
    )


def remote_only(deployment: Deployment) -> dict[str, tuple[str, ...]]:
    """Backend names of the versions the local host does not load, by ref."""
    return {v.ref: v.backends for v in deployment.spec.versions if v.remote_only}


class Controller:
    def __init__(
        self,
        service: EndpointService,
        router: Router,
        placement: Placement,
        *,
        clock: Clock,
        refresh_seconds: float = 2.0,
    ) -> None:
        self.service = service
        self.router = router
        self.placement = placement
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self._tasks: set[asyncio.Task[Any]] = set()
        self._work: dict[tuple[str, str, int], asyncio.Task[Any]] = {}
        """The running task of each (kind, endpoint, deployment): one of each at a time."""
        self._known: dict[tuple[str, int], DeploymentState] = {}
        """The live deployments as this process last saw them (``_follow``)."""
        self._mark: tuple[int, int] | None = None
        self._running = False
        # Every tick still, should a change event be lost; at once when nudged.
        self._watcher = BackgroundTask(
            "routing-watch",
            self._look,
            refresh_seconds,
            first_after=refresh_seconds,
            failure="could not refresh the routing table",  # a database hiccup
        )

    # ---- lifetime
    async def start(self) -> None:
        """Build every route, then resume unfinished work (call once, on the serving loop)."""
        self._running = True
        await self.refresh_all()
        await self._follow()
        self._watcher.start()  # at once if nudged meanwhile

    def nudge(self) -> None:
        """An endpoint or deployment changed (a change event, from any process): look now,
        not at the next refresh tick. Safe from any thread; nothing before ``start``."""
        if self._running:
            self._watcher.kick()

    def _resume(self, deployment: Deployment) -> None:
        """Take up what a live deployment asks of this process: roll out a pending one;
        load (pinned) the versions of one that serves, drive its canary, close its
        rollback window."""
        name, ident = deployment.endpoint, deployment.id
        if deployment.state is DeploymentState.PENDING:
            self.submit(deployment)
        elif deployment.state in (DeploymentState.ACTIVE, DeploymentState.SUPERSEDED):
            self._once("warm", name, ident, lambda: self._warm(deployment))
            if deployment.state is DeploymentState.ACTIVE and (
                deployment.rollout.status is RolloutStatus.PROGRESSING
            ):
                step = deployment.rollout.step
                self._once("canary", name, ident, lambda: self._canary(name, ident, step))
            if deployment.state is DeploymentState.SUPERSEDED:
                self._once("window", name, ident, lambda: self._close_window(name, ident))

    def _once(
        self, kind: str, name: str, ident: int, work: Callable[[], Coroutine[Any, Any, Any]]
    ) -> None:
        """Spawn ``work()`` unless this process runs that kind of work for that deployment
        already (every process takes up what it sees, its own changes included)."""
        key = (kind, name, ident)
        running = self._work.get(key)
        if running is not None and not running.done():
            return
        self._work[key] = self._spawn(work())

    async def _follow(self) -> None:
        """Take up, in this process, what changed in the live deployments since it last
        looked, whichever process changed them: a new pending deployment is rolled out
        here too (so traffic moves when its versions are ready here as well), one that
        now serves has its versions loaded and pinned here, and the versions of one
        that stopped serving (retired, failed, rolled back) are unloaded here."""
        deployments = await self._call(self.service.deployments_in, LIVE)
        seen = {(d.endpoint, d.id): d.state for d in deployments}
        for deployment in deployments:
            if self._known.get((deployment.endpoint, deployment.id)) is not deployment.state:
                self._resume(deployment)
        ended = [key for key in self._known if key not in seen]
        self._known = seen
        for name, ident in ended:
            deployment = await self._call(self.service.get_deployment, name, ident)
            await self._unload_unused(await self._call(self.service.version_refs, deployment))

    async def stop(self) -> None:
        self._running = False
        await self._watcher.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.router.close()

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("serving controller task failed", exc_info=task.exception())

    async def _call(self, function: Callable[[*Ts], T], *args: *Ts) -> T:
        return await anyio.to_thread.run_sync(function, *args)

    # ---- routes
    async def refresh(self, name: str) -> None:
        self.router.install(await self._call(self.service.route, name))

    async def refresh_all(self) -> None:
        self._mark = await self._call(self.service.revision_mark)
        self.router.install_all(await self._call(self.service.routes))

    async def _look(self) -> None:
        mark = await self._call(self.service.revision_mark)
        if mark != self._mark:
            await self.refresh_all()
        await self._follow()

    # ---- rolling out
    def submit(self, deployment: Deployment) -> None:
        """Roll out a pending deployment (returns at once)."""
        name, ident = deployment.endpoint, deployment.id
        self._once("roll_out", name, ident, lambda: self._roll_out(deployment))

    async def _roll_out(self, deployment: Deployment) -> None:
        name, ident = deployment.endpoint, deployment.id
        try:
            refs: list[VersionRef] = await self._call(self.service.version_refs, deployment)
        except ModelportError as exc:
            await self._call(self.service.fail, name, ident, exc.message, list(deployment.progress))
            return
        progress = {ref.ref: progress_of(ref, None) for ref in refs}
        log_event(
            log,
            "deployment.rolling_out",
            endpoint=name,
            deployment=ident,
            versions=",".join(ref.ref for ref in refs),
            rollout=deployment.spec.rollout.kind.value,
        )
        loads: list[tuple[VersionRef, Future[VersionStatus]]] = []
        failure: str | None = None
        remote = remote_only(deployment)
        for ref in refs:
            if ref.ref in remote:
                continue
            try:
                done = self.placement.place(ref)
            except ModelportError as exc:
                failure = f"{ref.ref}: {exc.message}"
                progress[ref.ref] = progress_of(ref, None, exc.message)
                break
            progress[ref.ref] = progress_of(ref, self.placement.status(ref))
            loads.append((ref, done))
        if failure is None:
            await self._call(self.service.record_progress, name, ident, list(progress.values()))
            outcomes = await asyncio.gather(
                *(self._loaded(ref, done, name, ident, progress) for ref, done in loads)
            )
            outcomes += await asyncio.gather(
                *(self._remote_ready(ref, remote[ref.ref], progress) for ref in refs
                  if ref.ref in remote)
            )  # fmt: skip
            failure = next((f for f in outcomes if f is not None), None)
        if failure is not None:
            await self._call(self.service.fail, name, ident, failure, list(progress.values()))
            log_event(
                log,
                "deployment.failed",
                level=logging.WARNING,
                endpoint=name,
                deployment=ident,
                cause=failure,
            )
            await self._unload_unused(refs)
            return
        activation = await self._call(self.service.activate, name, ident, list(progress.values()))
        if activation is None:
            return
        log_event(
            log,
            "deployment.activated",
            endpoint=name,
            deployment=ident,
            versions=",".join(ref.ref for ref in refs),
            retired=",".join(str(r.id) for r in activation.retired),
        )
        await self.refresh(name)
        for retired in activation.retired:
            await self._unload_unused(await self._call(self.service.version_refs, retired))
        previous = activation.endpoint.previous_deployment
        if previous is not None:
            self._once("window", name, previous, lambda: self._close_window(name, previous))
        if deployment.spec.rollout.kind is RolloutKind.CANARY:
            self._once("canary", name, ident, lambda: self._canary(name, ident, 0))

    async def _loaded(
        self,
        ref: VersionRef,
        done: Future[VersionStatus],
        name: str,
        ident: int,
        progress: dict[str, VersionProgress],
    ) -> str | None:
        """Wait for one version; record its progress; return why it failed (None: ready)."""
        try:
            # Shielded: cancelling this wait must not cancel the host's load (others share it).
            status = await asyncio.shield(asyncio.wrap_future(done))
        except ModelportError as exc:
            progress[ref.ref] = progress_of(ref, self.placement.status(ref), exc.message)
            return f"{ref.ref}: {exc.message}"
        except Exception as exc:
            progress[ref.ref] = progress_of(ref, None, str(exc))
            return f"{ref.ref}: {exc}"
        progress[ref.ref] = progress_of(ref, status)
        await self._call(self.service.record_progress, name, ident, list(progress.values()))
        log_event(log, "deployment.version_ready", endpoint=name, deployment=ident, version=ref.ref)
        return None

    async def _remote_ready(
        self, ref: VersionRef, names: tuple[str, ...], progress: dict[str, VersionProgress]
    ) -> str | None:
        """A version served by remote backends alone is ready once one of them has it
        ready (a backend that cannot tell, e.g. an OpenAI-compatible one, counts as ready)."""
        reasons = []
        for name in names:
            backend = self.router.remotes(name)
            prepare = getattr(backend, "prepare", None)
            if backend is None:
                reasons.append(f"backend {name!r} is not declared")
                continue
            reason = None if prepare is None else await prepare(ref)
            if reason is None:
                progress[ref.ref] = VersionProgress(
                    ref=ref.ref, state="ready", warm_up=f"ready on {name}"
                )
                return None
            reasons.append(reason)
        cause = "; ".join(reasons)
        progress[ref.ref] = VersionProgress(ref=ref.ref, state="failed", cause=cause)
        return f"{ref.ref}: {cause}"

    async def _warm(self, deployment: Deployment) -> None:
        """Load (pinned) the versions of a deployment that serves, after a restart."""
        remote = remote_only(deployment)
        for ref in await self._call(self.service.version_refs, deployment):
            if ref.ref in remote:
                continue
            with contextlib.suppress(ModelportError):
                done = self.placement.place(ref)
                with contextlib.suppress(ModelportError):
                    await asyncio.shield(asyncio.wrap_future(done))

    async def _unload_unused(self, refs: list[VersionRef]) -> None:
        live = await self._call(self.service.live_refs)
        for ref in refs:
            if ref.ref in live or self.placement.status(ref) is None:
                continue
            with contextlib.suppress(ModelportError):
                await self._call(self.placement.release, ref)

    # ---- rollback
    async def rollback(self, name: str, deployment: int) -> Deployment:
        """Restore the deployment ``deployment`` replaced, and route to it at once."""
        _, rolled = await self._call(self.service.rollback, name, deployment)
        log_event(
            log, "deployment.rolled_back", endpoint=name, deployment=deployment, restored=rolled.id
        )
        await self.refresh(name)
        await self._unload_unused(await self._call(self.service.version_refs, rolled))
        return rolled

    async def _close_window(self, name: str, deployment: int) -> None:
        endpoint = await self._call(self.service.get_endpoint, name)
        if endpoint.previous_deployment != deployment or endpoint.rollback_until is None:
            return
        await self.clock.sleep((endpoint.rollback_until - self.clock.now()).total_seconds())
        retired = await self._call(self.service.retire, name, deployment)
        if retired is not None:
            log_event(log, "deployment.retired", endpoint=name, deployment=deployment)
            await self.refresh(name)
            await self._unload_unused(await self._call(self.service.version_refs, retired))

    # ---- canary
    async def _canary(self, name: str, ident: int, step: int) -> None:
        deployment = await self._call(self.service.get_deployment, name, ident)
        policy = deployment.spec.rollout.canary
        assert policy is not None
        stable, candidate = (v.ref for v in deployment.spec.versions)
        stats = self.router.stats
        stats.reset(ident)
        step_started = self.clock.monotonic()
        while True:
            await self.clock.sleep(policy.check_seconds)
            route = self.router.table.find(name)
            if route is None or route.deployment != ident:
                return  # rolled back or replaced: nothing left to steer
            # Every process resumes a running canary, and any of them may have moved it:
            # follow the database before judging (each move is guarded by its step).
            stored = await self._stored_step(name, ident)
            if stored is None:
                return  # halted, complete, rolled back or replaced elsewhere
            if stored != step:  # moved elsewhere
                step, step_started = stored, self.clock.monotonic()
                stats.reset(ident)
                await self.refresh(name)
                continue
            verdict = judge(policy, stats.window(ident, stable), stats.window(ident, candidate))
            if verdict.verdict is Verdict.BAD:
                # Halting is right at any step: no step guard.
                halted = Rollout(RolloutStatus.HALTED, step, verdict.reason)
                moved = await self._call(self.service.set_weights, name, ident, (100, 0), halted)
                if moved is not None:
                    log_event(
                        log,
                        "canary.halted",
                        level=logging.WARNING,
                        endpoint=name,
                        deployment=ident,
                        step=step,
                        reason=verdict.reason,
                    )
                await self.refresh(name)
                return
            elapsed = self.clock.monotonic() - step_started
            if verdict.verdict is Verdict.GOOD and elapsed >= policy.interval_seconds:
                share = policy.steps[step + 1]
                status = RolloutStatus.COMPLETE if share == 100 else RolloutStatus.PROGRESSING
                moved = await self._call(
                    partial(self.service.set_weights, from_step=step),
                    name,
                    ident,
                    canary_weights(share),
                    Rollout(status, step + 1),
                )
                if moved is not None:
                    log_event(
                        log,
                        "canary.moved",
                        endpoint=name,
                        deployment=ident,
                        step=step + 1,
                        candidate_share=share,
                        status=status.value,
                    )
                if moved is None:  # another controller moved it first: follow it now
                    stored = await self._stored_step(name, ident)
                    if stored is None:
                        return
                    step = stored
                elif status is RolloutStatus.COMPLETE:
                    await self.refresh(name)
                    return
                else:
                    step += 1
                await self.refresh(name)
                stats.reset(ident)
                step_started = self.clock.monotonic()

    async def _stored_step(self, name: str, ident: int) -> int | None:
        """The step a canary is at in the database; None, with this process's route
        refreshed, when it is no longer running (halted, complete, rolled back)."""
        stored = await self._call(self.service.get_deployment, name, ident)
        if (
            stored.state is DeploymentState.ACTIVE
            and stored.rollout.status is RolloutStatus.PROGRESSING
        ):
            return stored.rollout.step
        await self.refresh(name)
        return None
