"""Pure rules: names, SPDX licenses, the lifecycle table (with a property test)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelport.errors import Conflict, InvalidInput
from modelport.registry import lifecycle
from modelport.registry.licenses import normalize_license
from modelport.registry.names import (
    check_alias,
    check_model_name,
    check_owner,
    check_version,
    split_version_ref,
)
from modelport.registry.types import LifecycleState as S


@pytest.mark.parametrize("name", ["a", "fraud-risk", "bert_base.v2", "9lives", "x" * 128])
def test_valid_model_names(name: str) -> None:
    assert check_model_name(name) == name


@pytest.mark.parametrize("name", ["", "-x", ".x", "Upper", "a/b", "a b", "é", "x" * 129])
def test_invalid_model_names(name: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_model_name(name)
    assert info.value.code == "invalid_model_name"


def test_owner_length_limit() -> None:
    assert check_owner("o" * 64)
    with pytest.raises(InvalidInput):
        check_owner("o" * 65)


@pytest.mark.parametrize("version", ["1", "3", "1.0.2", "v2-rc_1", "A" * 64])
def test_valid_versions(version: str) -> None:
    assert check_version(version) == version


@pytest.mark.parametrize("version", ["", ".1", "-1", "1 0", "1/2", "a" * 65, "1:2"])
def test_invalid_versions(version: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_version(version)
    assert info.value.code == "invalid_version"


@pytest.mark.parametrize("alias", ["1", "42", "Prod", "-x", "", "a" * 65, "a.b"])
def test_invalid_aliases(alias: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_alias(alias)
    assert info.value.code == "invalid_alias"


def test_split_refs() -> None:
    assert split_version_ref("acme/fraud:3") == ("acme", "fraud", "3")
    assert split_version_ref("acme/fraud") == ("acme", "fraud", None)
    with pytest.raises(InvalidInput):
        split_version_ref("fraud:3")


@pytest.mark.parametrize(
    ("given_", "normal"),
    [
        ("MIT", "MIT"),
        ("mit", "MIT"),
        ("apache-2.0 OR mit", "Apache-2.0 OR MIT"),
        ("GPL-2.0-only WITH Classpath-exception-2.0", "GPL-2.0-only WITH Classpath-exception-2.0"),
        ("LicenseRef-acme-eula", "LicenseRef-acme-eula"),
        ("MIT AND LicenseRef-x", "MIT AND LicenseRef-x"),
    ],
)
def test_spdx_licenses_normalize(given_: str, normal: str) -> None:
    assert normalize_license(given_) == normal


@pytest.mark.parametrize("bad", ["", "   ", "not-a-license", "MIT AND", "MIT WITH MIT", "x" * 300])
def test_unknown_or_malformed_licenses_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInput) as info:
        normalize_license(bad, field="manifest.license")
    assert info.value.code == "invalid_license"
    assert info.value.extra["field"] == "manifest.license"


def test_lifecycle_table_matches_the_issue() -> None:
    expected = {
        (S.CANDIDATE, S.VALIDATED),
        (S.VALIDATED, S.APPROVED),
        (S.APPROVED, S.DEPLOYED),
        (S.DEPLOYED, S.DEPRECATED),
        (S.DEPRECATED, S.ARCHIVED),
        (S.APPROVED, S.DEPRECATED),
        (S.CANDIDATE, S.REJECTED),
        (S.VALIDATED, S.REJECTED),
        (S.APPROVED, S.REJECTED),
        (S.REJECTED, S.ARCHIVED),
    }
    actual = {(a, b) for a, targets in lifecycle.TRANSITIONS.items() for b in targets}
    assert actual == expected


def test_illegal_transition_names_both_states() -> None:
    with pytest.raises(Conflict) as info:
        lifecycle.check_transition(S.CANDIDATE, S.DEPLOYED)
    assert info.value.code == "illegal_transition"
    assert info.value.extra == {"from_state": "candidate", "to_state": "deployed"}


def test_unknown_state_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as info:
        lifecycle.parse_state("shipped")
    assert info.value.code == "invalid_state"


@given(st.lists(st.sampled_from(list(S)), max_size=40))
def test_random_transition_sequences_only_follow_the_table(targets: list[S]) -> None:
    state = lifecycle.INITIAL
    path = [state]
    for target in targets:
        try:
            lifecycle.check_transition(state, target)
        except Conflict:
            assert target not in lifecycle.TRANSITIONS[state]
            continue
        assert target in lifecycle.TRANSITIONS[state]
        state = target
        path.append(state)
    # Reachable states only, and nothing ever returns to candidate or leaves archived.
    assert S.CANDIDATE not in path[1:]
    if S.ARCHIVED in path:
        assert path[-1] is S.ARCHIVED
    # validated, when visited, always directly follows candidate.
    for before, after in itertools.pairwise(path):
        if after is S.VALIDATED:
            assert before is S.CANDIDATE
