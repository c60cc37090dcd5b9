"""A cancellation across threads: hooks run when it is cancelled, and the point of no
return (``settle``) decides between recording nothing and finishing whole."""

from __future__ import annotations

import pytest

from modelport.sandbox.cancel import Cancellation, Cancelled


def test_hooks_run_once_while_hooked_and_at_once_when_hooked_late() -> None:
    cancel = Cancellation()
    ran: list[str] = []
    with cancel.hooked(lambda: ran.append("early")):
        pass
    with cancel.hooked(lambda: ran.append("inside")):
        cancel.check()
        assert cancel.cancel() is True
        assert cancel.cancel() is True  # again: its hooks do not run twice
    with cancel.hooked(lambda: ran.append("late")):
        pass
    assert ran == ["inside", "late"]
    with pytest.raises(Cancelled):
        cancel.check()


def test_a_cancel_before_the_point_of_no_return_wins_and_one_after_it_is_refused() -> None:
    early = Cancellation()
    early.cancel()
    with pytest.raises(Cancelled):
        early.settle()

    late = Cancellation()
    ran: list[str] = []
    late.settle()
    with late.hooked(lambda: ran.append("hook")):
        assert late.cancel() is False
    assert not late.cancelled and ran == []
    late.check()
