"""The scheduler alone (no model): admission by KV budget and running slots, the
bounded waiting queue, refusals, priority and preemption."""

from __future__ import annotations

import pytest

from modelport.errors import InvalidInput, Overloaded
from modelport.runtime.generative.kv import KvLedger
from modelport.runtime.generative.scheduler import (
    DEFAULT_RETRY_AFTER,
    ScheduledSequence,
    Scheduler,
)
from modelport.runtime.types import Priority

BATCH, INTERACTIVE, OFFLINE = Priority.BATCH, Priority.INTERACTIVE, Priority.OFFLINE


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def scheduler(capacity: int = 100, **options: int) -> tuple[Scheduler, Clock]:
    clock = Clock()
    options.setdefault("context_length", 80)
    return Scheduler(ledger=KvLedger(capacity, 10), clock=clock, **options), clock


def seq(prompt: int, max_tokens: int, priority: Priority = INTERACTIVE) -> ScheduledSequence:
    return ScheduledSequence(prompt, max_tokens, priority)


def test_admits_what_fits_and_keeps_the_rest_waiting() -> None:
    s, _ = scheduler(capacity=100)
    a, b, c = seq(10, 30), seq(10, 40), seq(5, 20)
    s.add([a, b, c])
    out = s.schedule()
    assert out.admitted == [a, b] and out.preempted == []
    assert s.ledger.used_tokens == 90 and s.ledger.used_bytes == 900
    # c (25 tokens) does not fit in the 10 left: it waits, in order.
    assert s.waiting() == [c] and s.schedule().admitted == []
    assert s.finish(a)
    assert s.schedule().admitted == [c]
    assert s.ledger.used_tokens == 75
    assert not s.finish(a)  # already gone


def test_max_running_bounds_the_batch() -> None:
    s, _ = scheduler(capacity=1000, max_running=2)
    seqs = [seq(1, 1) for _ in range(3)]
    s.add(seqs)
    assert s.schedule().admitted == seqs[:2]
    assert s.waiting() == seqs[2:]


def test_a_waiting_head_is_not_overtaken() -> None:
    s, _ = scheduler(capacity=100)
    big, small = seq(10, 60), seq(1, 1)
    running = seq(10, 40)
    s.add([running])
    s.schedule()
    s.add([big, small])
    assert s.schedule().admitted == []  # big (70) does not fit in 50; small waits behind
    assert s.waiting() == [big, small]
    s.finish(running)
    assert s.schedule().admitted == [big, small]


def test_prefill_budget_admits_at_least_one() -> None:
    s, _ = scheduler(capacity=1000, max_prefill_tokens=15)
    a, b, c = seq(20, 1), seq(10, 1), seq(10, 1)
    s.add([a, b, c])
    assert s.schedule().admitted == [a]  # alone over the budget, but always one
    assert s.schedule().admitted == [b]  # b + c would be 20 > 15


def test_never_fits_is_refused_before_queueing() -> None:
    s, _ = scheduler(capacity=50, context_length=80)
    with pytest.raises(InvalidInput) as exc:
        s.check(30, 51)  # 81 > context length
    assert exc.value.code == "context_length_exceeded"
    with pytest.raises(InvalidInput) as exc:
        s.check(30, 21)  # 51 > the whole KV budget
    assert exc.value.code == "context_length_exceeded"
    s.check(30, 20)
    assert s.waiting_count == 0 and s.ledger.used_tokens == 0


def test_waiting_then_queue_full_with_retry_after_from_recent_admissions() -> None:
    s, clock = scheduler(capacity=20, max_waiting=2, context_length=20)
    s.check(5, 5, n=2)  # room to wait
    s.add([seq(5, 5), seq(5, 5)])
    with pytest.raises(Overloaded) as exc:
        s.check(5, 5)
    assert exc.value.code == "queue_full"
    assert exc.value.extra["retry_after"] == DEFAULT_RETRY_AFTER  # nothing admitted yet
    # Admissions at 2 per second: one more place frees in about half a second.
    for _ in range(5):
        out = s.schedule()
        for admitted in out.admitted:
            s.finish(admitted)
        s.add([seq(5, 5) for _ in range(2 - s.waiting_count)])
        clock.now += 0.5
    clock.now -= 0.5  # right after the last admission
    with pytest.raises(Overloaded) as exc:
        s.check(5, 5, n=2)  # two places needed
    assert exc.value.extra["retry_after"] == pytest.approx(2 / s_rate(s))
    assert exc.value.extra["queued"] == 2


def s_rate(s: Scheduler) -> float:
    times = list(s._admissions)
    return (len(times) - 1) / (times[-1] - times[0])


def test_interactive_before_batch() -> None:
    s, _ = scheduler(capacity=100, max_running=1)
    b, i = seq(5, 5, BATCH), seq(5, 5, INTERACTIVE)
    s.add([b, i])
    assert s.schedule().admitted == [i]


def test_interactive_preempts_newest_batch_only_when_that_makes_room() -> None:
    s, _ = scheduler(capacity=100)
    old, new = seq(10, 30, BATCH), seq(10, 30, BATCH)
    s.add([old, new])
    s.schedule()
    urgent = seq(10, 40)  # 50 > 20 free: preempting `new` (40) makes 60
    s.add([urgent])
    out = s.schedule()
    assert out.preempted == [new] and out.admitted == [urgent]
    assert new.preemptions == 1 and s.preemptions == 1
    assert s.running == [old, urgent] and s.waiting() == [new]
    # A batch request never preempts another batch one, and nothing is preempted in vain.
    s.add([seq(10, 60, BATCH)])
    assert s.schedule().preempted == []
    huge = seq(10, 70)  # 80 tokens: even preempting old leaves urgent's 50 in use
    s.add([huge])
    assert s.schedule() == type(out)()
    assert s.running == [old, urgent]


def test_preempted_sequences_return_first_and_in_order() -> None:
    s, _ = scheduler(capacity=100)
    a, b = seq(10, 30, BATCH), seq(10, 30, BATCH)
    s.add([a, b])
    s.schedule()
    s.add([seq(10, 80)])  # needs both a and b out
    out = s.schedule()
    assert out.preempted == [b, a]
    assert s.waiting()[:2] == [a, b]
    a.generated_tokens = 7
    assert a.prefill_tokens == 17 and a.reserve_tokens == 40


def test_interactive_never_preempts_interactive() -> None:
    s, _ = scheduler(capacity=100)
    s.add([seq(10, 80)])
    s.schedule()
    s.add([seq(10, 20)])
    assert s.schedule().preempted == []


def test_offline_is_admitted_last() -> None:
    s, _ = scheduler(capacity=100, max_running=2)
    o, b, i = seq(5, 5, OFFLINE), seq(5, 5, BATCH), seq(5, 5, INTERACTIVE)
    s.add([o, b, i])
    assert s.schedule().admitted == [i, b]
    assert s.waiting() == [o]
    s.finish(i)
    assert s.schedule().admitted == [o]


def test_offline_is_preempted_first_then_batch() -> None:
    s, _ = scheduler(capacity=100)
    bulk, old, new = seq(10, 20, BATCH), seq(10, 20, OFFLINE), seq(10, 20, OFFLINE)
    s.add([bulk, old, new])
    assert s.schedule().admitted == [bulk, old, new]
    urgent = seq(10, 40)  # 50 > 10 free: both offline (30 each) go, the batch one stays
    s.add([urgent])
    out = s.schedule()
    assert out.preempted == [new, old] and out.admitted == [urgent]
    assert s.running == [bulk, urgent]
    # Back at the front of the offline queue, oldest first, behind no other class.
    assert s.waiting() == [old, new]
    # With no offline sequence left running, an interactive one takes the batch one's room.
    more = seq(10, 30)
    s.add([more])
    out = s.schedule()
    assert out.preempted == [bulk] and out.admitted == [more]
    assert s.waiting() == [bulk, old, new]


def test_a_batch_sequence_preempts_offline_ones_but_not_interactive_ones() -> None:
    s, _ = scheduler(capacity=100)
    offline, interactive = seq(10, 30, OFFLINE), seq(10, 30, INTERACTIVE)
    s.add([interactive, offline])
    s.schedule()
    bulk = seq(10, 40, BATCH)  # 50 > 20 free: the offline sequence makes room
    s.add([bulk])
    out = s.schedule()
    assert out.preempted == [offline] and out.admitted == [bulk]
    # An offline sequence never preempts, and the batch one does not take interactive room.
    s.add([seq(10, 50, BATCH)])
    assert s.schedule().preempted == []
    assert s.running == [interactive, bulk]


def test_offline_sequences_hold_at_most_their_share_of_the_waiting_queue() -> None:
    s, _ = scheduler(capacity=20, max_waiting=4, context_length=20, max_running=1)
    s.add([seq(5, 5)])
    s.schedule()  # one running: everything below waits
    s.check(5, 5, n=2, priority=OFFLINE)
    s.add([seq(5, 5, OFFLINE), seq(5, 5, OFFLINE)])
    with pytest.raises(Overloaded) as exc:
        s.check(5, 5, priority=OFFLINE)
    assert exc.value.code == "queue_full" and "offline" in exc.value.message
    assert exc.value.extra["retry_after"] > 0
    # The other half is still there for interactive and batch requests.
    s.check(5, 5, priority=BATCH)
    s.check(5, 5, n=2, priority=INTERACTIVE)
    s.add([seq(5, 5, BATCH), seq(5, 5)])
    with pytest.raises(Overloaded):
        s.check(5, 5)
