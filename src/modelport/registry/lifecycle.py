"""The lifecycle state machine of a version: a pure table, no I/O.

::

    candidate -> validated -> approved -> deployed -> deprecated -> archived
        |            |           |                      ^
        |            |           +----------------------+   (approved -> deprecated)
        +------------+-----------+--> rejected -> archived

A version's state is the ``to_state`` of its latest lifecycle event; publishing
appends the first event (``None -> candidate``). ``validated`` is only reached by
running a validation (see ``modelport.registry.validation``).
"""

from __future__ import annotations

from types import MappingProxyType

from modelport.errors import Conflict, InvalidInput
from modelport.registry.types import LifecycleState as S

INITIAL = S.CANDIDATE

TRANSITIONS: MappingProxyType[S, frozenset[S]] = MappingProxyType(
    {
        S.CANDIDATE: frozenset({S.VALIDATED, S.REJECTED}),
        S.VALIDATED: frozenset({S.APPROVED, S.REJECTED}),
        S.APPROVED: frozenset({S.DEPLOYED, S.DEPRECATED, S.REJECTED}),
        S.DEPLOYED: frozenset({S.DEPRECATED}),
        S.DEPRECATED: frozenset({S.ARCHIVED}),
        S.REJECTED: frozenset({S.ARCHIVED}),
        S.ARCHIVED: frozenset(),
    }
)
"""Allowed next states for each state."""

SERVABLE_BY_DEFAULT = (S.DEPLOYED, S.APPROVED)
"""States preferred when a model is resolved without a version or alias."""

RETIRED = frozenset({S.REJECTED, S.ARCHIVED})
"""States never chosen when resolving without a version or alias."""


def parse_state(value: str) -> S:
    try:
        return S(value)
    except ValueError:
        raise InvalidInput(
            f"unknown lifecycle state {value!r} (known: {', '.join(s.value for s in S)})",
            code="invalid_state",
            field="to",
        ) from None


def allowed(current: S, target: S) -> bool:
    return target in TRANSITIONS[current]


def check_transition(current: S, target: S) -> None:
    """Raise ``illegal_transition`` (409) unless ``current -> target`` is in the table."""
    if not allowed(current, target):
        options = ", ".join(sorted(s.value for s in TRANSITIONS[current])) or "none"
        raise Conflict(
            f"illegal transition {current.value} -> {target.value} (allowed from "
            f"{current.value}: {options})",
            code="illegal_transition",
            from_state=current.value,
            to_state=target.value,
        )
