"""The moderators on their own: rules by severity and strictness (whole words, any case,
patterns), a classifier's scores against thresholds, decisions combined."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from modelport.errors import InvalidInput
from modelport.moderation import (
    Disposition,
    ModelModerator,
    Policy,
    Rule,
    RuleModerator,
    Severity,
    Strictness,
    Threshold,
)
from modelport.moderation.service import check_draft
from modelport.moderation.types import Decision, combine

RULES = (
    Rule("mild", words=("darn",), severity=Severity.LOW),
    Rule("rude", words=("rude word",), severity=Severity.MEDIUM),
    Rule("secrets", patterns=(r"api[_-]?key\s*=\s*\w+",), severity=Severity.HIGH),
)


def judge(strictness: Strictness, *texts: str) -> Decision:
    policy = Policy(strictness=strictness, rules=RULES, tenant="t", id="p", version=1)
    return asyncio.run(RuleModerator().moderate(list(texts), policy))


@pytest.mark.parametrize(
    ("strictness", "text", "expected"),
    [
        (Strictness.OFF, "API_KEY = abc", Disposition.ALLOWED),
        (Strictness.LOW, "darn", Disposition.ALLOWED),
        (Strictness.LOW, "a RUDE word", Disposition.FLAGGED),
        (Strictness.LOW, "api_key = abc", Disposition.BLOCKED),
        (Strictness.MEDIUM, "Darn!", Disposition.FLAGGED),
        (Strictness.MEDIUM, "that rude word", Disposition.BLOCKED),
        (Strictness.HIGH, "darn", Disposition.BLOCKED),
        (Strictness.HIGH, "nothing to see", Disposition.ALLOWED),
    ],
)
def test_rules_flag_or_block_by_severity_and_strictness(
    strictness: Strictness, text: str, expected: Disposition
) -> None:
    assert judge(strictness, text).disposition is expected


def test_words_match_whole_words_in_any_case() -> None:
    assert judge(Strictness.HIGH, "darned socks", "undarn").disposition is Disposition.ALLOWED
    decision = judge(Strictness.HIGH, "fine", "oh, DARN.")
    assert decision.disposition is Disposition.BLOCKED
    assert decision.categories == ("mild",) and "DARN" in decision.reason


def test_the_worst_match_decides_and_every_category_is_named() -> None:
    decision = judge(Strictness.MEDIUM, "darn", "api-key=xyz")
    assert decision.disposition is Disposition.BLOCKED
    assert decision.categories == ("mild", "secrets")


def test_a_pattern_that_is_not_a_regular_expression_is_refused() -> None:
    with pytest.raises(InvalidInput) as refused:
        check_draft(Policy(rules=(Rule("bad", patterns=("(unclosed",)),)))
    assert refused.value.code == "invalid_pattern"


@pytest.mark.parametrize(
    "draft",
    [
        Policy(thresholds={"x": Threshold(0.9, 0.5)}),
        Policy(classifier="not a model"),
        Policy(rules=(Rule(""),)),
    ],
)
def test_a_policy_that_cannot_work_is_refused(draft: Policy) -> None:
    with pytest.raises(InvalidInput):
        check_draft(draft)


class Scores:
    """A classifier answering fixed scores, and what it was asked."""

    def __init__(self, scores: Mapping[str, Sequence[float]]) -> None:
        self.scores = scores
        self.asked: list[tuple[str, str, list[str]]] = []

    async def __call__(
        self, tenant: str, model: str, texts: Sequence[str]
    ) -> Mapping[str, Sequence[float]]:
        self.asked.append((tenant, model, list(texts)))
        return self.scores


def classify(
    strictness: Strictness,
    scores: Mapping[str, Sequence[float]],
    thresholds: Mapping[str, Threshold] | None = None,
) -> Decision:
    policy = Policy(
        strictness=strictness,
        classifier="t/clf",
        thresholds=thresholds or {},
        tenant="t",
        id="p",
        version=1,
    )
    return asyncio.run(ModelModerator(Scores(scores)).moderate(["a", "b"], policy))


def test_classifier_scores_flag_and_block_by_strictness() -> None:
    scores = {"violence": [0.1, 0.75], "spam": [0.5, 0.0]}
    low = classify(Strictness.LOW, scores)
    assert low.disposition is Disposition.FLAGGED and low.categories == ("violence",)
    medium = classify(Strictness.MEDIUM, scores)
    assert medium.disposition is Disposition.BLOCKED
    assert medium.categories == ("spam", "violence")
    assert medium.scores == {"spam": 0.5, "violence": 0.75}
    assert classify(Strictness.OFF, scores).disposition is Disposition.ALLOWED


def test_a_categorys_own_threshold_replaces_the_strictness() -> None:
    decision = classify(Strictness.HIGH, {"spam": [0.5]}, thresholds={"spam": Threshold(0.9, 0.95)})
    assert decision.disposition is Disposition.ALLOWED


def test_combined_decisions_keep_the_worst_and_everything_found() -> None:
    merged = combine(
        [
            Decision(Disposition.FLAGGED, "a", ("x",)),
            Decision(Disposition.ALLOWED),
            Decision(Disposition.BLOCKED, "b", ("y",), {"y": 0.9}),
        ]
    )
    assert merged == Decision(Disposition.BLOCKED, "a; b", ("x", "y"), {"y": 0.9})
