"""The queue policy: expiry, earliest deadline first, priorities, when to dispatch."""

from __future__ import annotations

from modelport.runtime.batching.queue import PendingRequest, RequestQueue, RequestState
from modelport.runtime.types import Priority

INTER, BULK, OFF = Priority.INTERACTIVE, Priority.BATCH, Priority.OFFLINE


def req(
    deadline: float, *, at: float = 0.0, rows: int = 1, group: object = "g", prio=INTER
) -> PendingRequest:
    return PendingRequest(priority=prio, deadline=deadline, enqueued_at=at, rows=rows, group=group)


def fill(*requests: PendingRequest) -> RequestQueue:
    q = RequestQueue()
    for r in requests:
        q.push(r)
    return q


def test_expired_requests_are_removed_and_never_batched() -> None:
    late, ok = req(5.0), req(50.0)
    q = fill(late, ok)
    d = q.step(10.0, max_batch_size=8, max_delay=0.0)
    assert d.expired == [late] and late.state is RequestState.EXPIRED
    assert d.batch == [ok] and ok.state is RequestState.EXECUTING
    assert len(q) == 0


def test_batch_takes_compatible_requests_in_deadline_order_up_to_max_rows() -> None:
    r1, r2, r3, other = req(30.0, rows=2), req(10.0, rows=2), req(20.0, rows=2), req(5, group="h")
    q = fill(r1, r2, r3, other)
    d = q.step(0.0, max_batch_size=4, max_delay=1.0)
    # The head is the most urgent overall (other); it is alone in its group and waits.
    assert d.batch is None and d.wake_at == 1.0
    d = q.step(1.0, max_batch_size=4, max_delay=1.0)
    assert d.batch == [other]
    d = q.step(1.0, max_batch_size=4, max_delay=1.0)
    assert d.batch == [r2, r3]  # full at 4 rows: r1 is left for the next batch
    assert len(q) == 1


def test_a_request_larger_than_the_limit_runs_alone() -> None:
    big, small = req(10.0, rows=9), req(11.0)
    q = fill(big, small)
    assert q.step(0.0, max_batch_size=4, max_delay=1.0).batch == [big]


def test_interactive_requests_head_the_batch_before_more_urgent_batch_requests() -> None:
    urgent_batch = req(1.0, prio=BULK, group="b")
    relaxed_interactive = req(100.0, prio=INTER, group="i")
    q = fill(urgent_batch, relaxed_interactive)
    assert q.step(0.0, max_batch_size=1, max_delay=0.0).batch == [relaxed_interactive]
    assert q.step(0.0, max_batch_size=1, max_delay=0.0).batch == [urgent_batch]


def test_batch_requests_fill_spare_rows_after_interactive_ones() -> None:
    i1, b1, i2 = req(9.0, prio=INTER), req(1.0, prio=BULK), req(8.0, prio=INTER)
    q = fill(i1, b1, i2)
    assert q.step(0.0, max_batch_size=3, max_delay=0.0).batch == [i2, i1, b1]


def test_waits_for_more_rows_until_the_oldest_request_has_waited_max_delay() -> None:
    r1 = req(100.0, at=0.0)
    q = fill(r1)
    d = q.step(0.0005, max_batch_size=8, max_delay=0.002)
    assert d.batch is None and d.wake_at == 0.002
    r2 = req(100.0, at=0.001)
    q.push(r2)
    d = q.step(0.002, max_batch_size=8, max_delay=0.002)
    assert d.batch == [r1, r2]


def test_dispatches_early_when_waiting_would_miss_a_deadline() -> None:
    r = req(1.0, at=0.0)
    q = fill(r)
    d = q.step(0.0, max_batch_size=8, max_delay=10.0, execute_estimate=0.4)
    assert d.batch is None and d.wake_at == 0.6
    assert q.step(0.6, max_batch_size=8, max_delay=10.0, execute_estimate=0.4).batch == [r]


def test_preferred_size_dispatches_at_once_with_the_largest_reachable_size() -> None:
    rs = [req(100.0 + i) for i in range(5)]
    q = fill(*rs)
    d = q.step(0.0, max_batch_size=8, max_delay=10.0, preferred_sizes=(2, 4))
    assert d.batch == rs[:4]
    d = q.step(0.0, max_batch_size=8, max_delay=10.0, preferred_sizes=(2, 4))
    assert d.batch is None  # one row left: below every preferred size, so it waits


def test_batching_off_dispatches_one_request_at_a_time_without_waiting() -> None:
    a, b = req(10.0), req(11.0)
    q = fill(a, b)
    assert q.step(0.0, max_batch_size=1, max_delay=5.0).batch == [a]
    assert q.step(0.0, max_batch_size=1, max_delay=5.0).batch == [b]


def test_discarded_requests_are_skipped() -> None:
    a, b = req(10.0), req(11.0)
    q = fill(a, b)
    assert q.discard(a, RequestState.CANCELLED)
    assert not q.discard(a, RequestState.CANCELLED)
    assert len(q) == 1
    assert q.step(0.0, max_batch_size=8, max_delay=0.0).batch == [b]
    assert q.step(0.0, max_batch_size=8, max_delay=0.0).batch is None


def test_depth_by_priority() -> None:
    q = fill(req(1.0, prio=INTER), req(1.0, prio=BULK), req(2.0, prio=BULK))
    assert (q.depth(INTER), q.depth(BULK), len(q)) == (1, 2, 3)


def test_offline_requests_are_served_only_when_no_interactive_or_batch_request_waits() -> None:
    urgent_offline = req(1.0, prio=OFF, group="o")
    relaxed_batch = req(100.0, prio=BULK, group="b")
    relaxed_interactive = req(200.0, prio=INTER, group="i")
    q = fill(urgent_offline, relaxed_batch, relaxed_interactive)
    step = lambda: q.step(0.0, max_batch_size=1, max_delay=0.0).batch  # noqa: E731
    assert step() == [relaxed_interactive]
    assert step() == [relaxed_batch]
    assert step() == [urgent_offline]
    assert step() is None


def test_offline_requests_fill_spare_rows_only_when_every_waiting_higher_one_is_in() -> None:
    i1, b1, o1 = req(9.0, prio=INTER), req(5.0, prio=BULK), req(1.0, prio=OFF)
    q = fill(o1, b1, i1)
    # Every interactive and batch request fits: the offline one takes the spare row.
    assert q.step(0.0, max_batch_size=4, max_delay=0.0).batch == [i1, b1, o1]

    i2, other_batch, o2 = req(9.0, prio=INTER), req(5.0, prio=BULK, group="h"), req(1.0, prio=OFF)
    q = fill(o2, other_batch, i2)
    # A batch request of another group still waits: the offline one does not go before it.
    assert q.step(0.0, max_batch_size=4, max_delay=0.0).batch == [i2]
    assert q.step(0.0, max_batch_size=4, max_delay=0.0).batch == [other_batch]
    assert q.step(0.0, max_batch_size=4, max_delay=0.0).batch == [o2]


def test_batches_prefer_higher_classes_when_rows_run_out() -> None:
    o1, b1, i1, i2 = (
        req(1.0, prio=OFF),
        req(2.0, prio=BULK),
        req(8.0, prio=INTER),
        req(9.0, prio=INTER),
    )
    q = fill(o1, b1, i1, i2)
    assert q.step(0.0, max_batch_size=3, max_delay=0.0).batch == [i1, i2, b1]
    assert q.step(0.0, max_batch_size=3, max_delay=0.0).batch == [o1]


def test_depth_of_the_offline_class() -> None:
    q = fill(req(1.0, prio=OFF), req(1.0, prio=BULK), req(2.0, prio=OFF))
    assert (q.depth(INTER), q.depth(BULK), q.depth(OFF), len(q)) == (0, 1, 2, 3)
