"""The continuous-batching scheduler: which sequences run in the next step.

Pure Python (no torch), in the shape of vLLM v1's scheduler. Sequences are in one of
three places: a waiting queue per priority (``interactive``, then ``batch``, then
``offline``, FIFO within each, preempted sequences at the front of theirs), the running
set, or gone.
Each engine step asks ``schedule()``:

1. the heads of the waiting queues are admitted while the running set has room
   (``max_running``), the KV ledger has their whole reservation (prompt +
   ``max_tokens``) and the step's prefill budget lasts (at least one is admitted);
2. a head that does not fit may take the place of running sequences of lower classes,
   ``offline`` ones first, then ``batch`` ones (for an interactive head), newest first
   within a class: they are preempted (their KV released, recomputed from their tokens
   when readmitted) only when that makes it fit;
3. a head that still does not fit blocks its queue (no overtaking within a class)
   and the queues of the lower classes too: offline sequences are admitted last.

``check`` refuses a request before anything is queued or allocated: one that can
never fit (``context_length_exceeded``) or that would overflow the bounded waiting
queue, or for an offline request its share of it (``queue_full``, with a Retry-After
predicted from recent admissions).

Not thread-safe: the engine serialises calls under its lock.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from modelport.errors import InvalidInput, Overloaded
from modelport.runtime.generative.kv import KvLedger
from modelport.runtime.types import PRIORITIES, Priority

DEFAULT_RETRY_AFTER = 1.0
"""Seconds suggested to a refused client before any admission was observed."""

_arrivals = itertools.count()


@dataclass(eq=False)
class ScheduledSequence:
    """What the scheduler knows of one sequence (the engine extends it)."""

    prompt_tokens: int
    max_tokens: int
    priority: Priority = Priority.INTERACTIVE
    arrival: int = field(default_factory=lambda: next(_arrivals))
    generated_tokens: int = 0
    """Output tokens so far: a readmitted (preempted) sequence prefills them too."""
    preemptions: int = 0

    @property
    def reserve_tokens(self) -> int:
        """KV tokens this sequence holds while it runs: its whole upper bound."""
        return self.prompt_tokens + self.max_tokens

    @property
    def prefill_tokens(self) -> int:
        """Tokens its prefill computes when it is (re)admitted."""
        return self.prompt_tokens + self.generated_tokens


@dataclass
class SchedulerOutput:
    """One step's decisions."""

    admitted: list[ScheduledSequence] = field(default_factory=list)
    """Sequences to prefill this step (their KV is reserved)."""
    preempted: list[ScheduledSequence] = field(default_factory=list)
    """Running sequences sent back to the waiting queue (their KV is released)."""


class Scheduler:
    def __init__(
        self,
        *,
        ledger: KvLedger,
        context_length: int,
        max_running: int = 32,
        max_waiting: int = 256,
        offline_waiting_share: float = 0.5,
        max_prefill_tokens: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ledger = ledger
        self.context_length = context_length
        self.max_running = max_running
        self.max_waiting = max_waiting
        # An offline flood leaves the rest of the waiting queue to the other classes.
        self.max_offline_waiting = max(1, int(max_waiting * offline_waiting_share))
        self.max_prefill_tokens = max_prefill_tokens
        self._clock = clock
        self._waiting: dict[Priority, deque[ScheduledSequence]] = {
            priority: deque() for priority in PRIORITIES
        }
        self.running: list[ScheduledSequence] = []
        self._admissions: deque[float] = deque(maxlen=64)
        self.preemptions = 0

    # -- what a submission may do -------------------------------------------------

    def check(
        self,
        prompt_tokens: int,
        max_tokens: int,
        n: int = 1,
        *,
        priority: Priority = Priority.INTERACTIVE,
    ) -> None:
        """Raise if a request of ``n`` sequences cannot be queued; allocates nothing."""
        total = prompt_tokens + max_tokens
        if total > self.context_length:
            raise InvalidInput(
                f"{prompt_tokens} prompt tokens + {max_tokens} max_tokens = {total} exceeds"
                f" the model's context length of {self.context_length}",
                code="context_length_exceeded",
                prompt_tokens=prompt_tokens,
                context_length=self.context_length,
            )
        if total > self.ledger.capacity_tokens:
            raise InvalidInput(
                f"{prompt_tokens} prompt tokens + {max_tokens} max_tokens = {total} exceeds"
                f" the {self.ledger.capacity_tokens} tokens of this model's KV cache budget",
                code="context_length_exceeded",
                prompt_tokens=prompt_tokens,
                context_length=self.ledger.capacity_tokens,
            )
        waiting = self.waiting_count
        if waiting + n > self.max_waiting:
            retry_after = self.predicted_wait(waiting + n - self.max_waiting)
            raise Overloaded(
                f"{waiting} sequences are waiting, the limit is {self.max_waiting}",
                code="queue_full",
                retry_after=retry_after,
                queued=waiting,
            )
        offline = len(self._waiting[Priority.OFFLINE])
        if priority is Priority.OFFLINE and offline + n > self.max_offline_waiting:
            raise Overloaded(
                f"{offline} offline sequences are waiting, their share is "
                f"{self.max_offline_waiting}",
                code="queue_full",
                retry_after=self.predicted_wait(offline + n - self.max_offline_waiting),
                queued=waiting,
            )

    def predicted_wait(self, sequences: int) -> float:
        """Seconds until ``sequences`` more leave the waiting queue, at the rate of the
        recent admissions."""
        times = self._admissions
        if len(times) < 2 or times[-1] <= times[0]:
            return DEFAULT_RETRY_AFTER
        rate = (len(times) - 1) / (times[-1] - times[0])
        # Admissions stopped since the last one count as slower progress, not faster.
        idle = max(0.0, self._clock() - times[-1])
        return max(0.001, sequences / rate + idle)

    # -- queues ----------------------------------------------------------------------

    def add(self, sequences: Iterable[ScheduledSequence]) -> None:
        for seq in sequences:
            self._waiting[seq.priority].append(seq)

    @property
    def waiting_count(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    def waiting(self) -> list[ScheduledSequence]:
        return [seq for priority in PRIORITIES for seq in self._waiting[priority]]

    def finish(self, seq: ScheduledSequence) -> bool:
        """Forget ``seq`` (finished or cancelled), releasing its KV if it ran; False when
        it was not here."""
        if seq in self.running:
            self.running.remove(seq)
            self.ledger.release(seq.reserve_tokens)
            return True
        queue = self._waiting[seq.priority]
        if seq in queue:
            queue.remove(seq)
            return True
        return False

    # -- the step -------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        prefill_budget = self.max_prefill_tokens
        for priority in PRIORITIES:
            queue = self._waiting[priority]
            while queue:
                seq = queue[0]
                if out.admitted and seq.prefill_tokens > prefill_budget:
                    return out
                fits = self._room_for(seq) or self._preempt_for(seq, out)
                if not fits:
                    return out
                queue.popleft()
                self.ledger.reserve(seq.reserve_tokens)
                self.running.append(seq)
                out.admitted.append(seq)
                prefill_budget -= seq.prefill_tokens
                self._admissions.append(self._clock())
        return out

    def _room_for(self, seq: ScheduledSequence) -> bool:
        return len(self.running) < self.max_running and self.ledger.fits(seq.reserve_tokens)

    def _preempt_for(self, seq: ScheduledSequence, out: SchedulerOutput) -> bool:
        """Preempt running sequences of lower classes than ``seq``'s, the least urgent
        class first (``offline``, then ``batch``) and newest first within it, so that
        ``seq`` fits; none when even all of them would not make room."""
        rank = PRIORITIES.index(seq.priority)
        victims = sorted(
            (
                s
                for s in self.running
                if PRIORITIES.index(s.priority) > rank and s not in out.admitted
            ),
            key=lambda s: (PRIORITIES.index(s.priority), s.arrival),
            reverse=True,
        )
        free, slots, chosen = self.ledger.free_tokens, self.max_running - len(self.running), 0
        for victim in victims:
            if free >= seq.reserve_tokens and slots >= 1:
                break
            free += victim.reserve_tokens
            slots += 1
            chosen += 1
        if free < seq.reserve_tokens or slots < 1:
            return False
        # Back to the front of their queues; newest pushed first, so the oldest leads.
        for victim in victims[:chosen]:
            self.running.remove(victim)
            self.ledger.release(victim.reserve_tokens)
            victim.preemptions += 1
            self._waiting[victim.priority].appendleft(victim)
            out.preempted.append(victim)
            self.preemptions += 1
        return True
