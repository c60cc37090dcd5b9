"""Pure rules of the control plane: deployment specs, schema compatibility, the canary judge,
and weighted and sticky choice."""

from __future__ import annotations

import random
from typing import Any

import pytest

from modelport.errors import InvalidInput
from modelport.manifest import TensorSpec
from modelport.serving.endpoints.compat import incompatibilities
from modelport.serving.endpoints.rollout import Verdict, judge
from modelport.serving.endpoints.spec import (
    check_endpoint_name,
    check_spec,
    initial_weights,
    spec_from_json,
    spec_to_json,
)
from modelport.serving.endpoints.types import (
    CanaryPolicy,
    DeploymentSpec,
    Resources,
    RolloutKind,
    RolloutPolicy,
    Stats,
    VersionWeight,
)
from modelport.serving.routing.traffic import cumulative, pick, subject_point


def spec(*weights: int, **fields: Any) -> DeploymentSpec:
    versions = tuple(VersionWeight("acme/m", str(i + 1), w) for i, w in enumerate(weights))
    return DeploymentSpec(versions=versions, **fields)


def canary(**policy: Any) -> DeploymentSpec:
    return spec(0, 0, rollout=RolloutPolicy(RolloutKind.CANARY, CanaryPolicy(**policy)))


def t(name: str, datatype: str = "FP32", shape: list[int] | None = None) -> TensorSpec:
    return TensorSpec(name=name, datatype=datatype, shape=shape or [-1, 4])


class TestCheckSpec:
    def test_good_specs_pass(self) -> None:
        check_spec(spec(100))
        check_spec(spec(95, 5))
        check_spec(spec(100, 0, shadow=VersionWeight("acme/m", "9")))
        check_spec(canary(steps=(5, 25, 50, 100)))
        # Scale to zero on the worker pool: no replica kept while idle.
        check_spec(spec(100, resources=Resources(min_replicas=0, max_replicas=2)))

    @pytest.mark.parametrize(
        ("bad", "field"),
        [
            (spec(90, 5), "versions"),
            (spec(), "versions"),
            (spec(101, -1), "versions.0.weight"),
            (spec(50, 50, shadow=VersionWeight("acme/m", "2")), "versions"),
            (spec(100, resources=Resources(min_replicas=2, max_replicas=1)), "resources"),
            (spec(100, resources=Resources(min_replicas=0, max_replicas=0)), "resources"),
            (spec(100, resources=Resources(min_replicas=-1, max_replicas=1)), "resources"),
            (spec(100, resources=Resources(memory_bytes=0)), "resources.memory_bytes"),
            (canary(steps=(5, 50)), "rollout.steps"),
            (canary(steps=(50, 25, 100)), "rollout.steps"),
            (canary(steps=(0, 100)), "rollout.steps"),
            (canary(min_requests=0), "rollout.min_requests"),
            (
                spec(100, rollout=RolloutPolicy(RolloutKind.CANARY, CanaryPolicy())),
                "versions",
            ),
        ],
    )
    def test_bad_specs_name_their_field(self, bad: DeploymentSpec, field: str) -> None:
        with pytest.raises(InvalidInput) as caught:
            check_spec(bad)
        assert caught.value.code == "invalid_deployment"
        assert caught.value.extra["field"] == field

    def test_a_canary_starts_at_its_first_step(self) -> None:
        assert initial_weights(canary(steps=(10, 100))) == (90, 10)
        assert initial_weights(spec(70, 30)) == (70, 30)

    def test_json_round_trip(self) -> None:
        for original in (
            spec(60, 40, shadow=VersionWeight("acme/s", "1"), resources=Resources(1, 3, 1 << 20)),
            canary(steps=(5, 100), interval_seconds=7.0, min_requests=3, latency_slack_ms=1.0),
        ):
            assert spec_from_json(spec_to_json(original)) == original

    @pytest.mark.parametrize("name", ["-a", "A", "a_b", "a" * 64, "", "fraud:predict"])
    def test_endpoint_names(self, name: str) -> None:
        with pytest.raises(InvalidInput):
            check_endpoint_name(name)
        check_endpoint_name("fraud-v2")


class TestCompatibility:
    def test_same_schema_and_extra_outputs_are_compatible(self) -> None:
        assert incompatibilities([t("x")], [t("y")], [t("x")], [t("y"), t("z")]) == []
        assert incompatibilities([t("x", shape=[1, 4])], [t("y")], [t("x")], [t("y")]) == []

    def test_each_difference_is_reported(self) -> None:
        problems = incompatibilities(
            [t("x"), t("w")],
            [t("y"), t("p")],
            [t("x", "FP64"), t("extra")],
            [t("y", shape=[-1, 3])],
        )
        assert problems == [
            "input 'x' is FP64, not FP32",
            "input 'w' is missing",
            "input 'extra' is new (callers do not send it)",
            "output 'y' has shape [-1, 3], not [-1, 4]",
            "output 'p' is missing",
        ]


class TestJudge:
    policy = CanaryPolicy(min_requests=10, max_error_rate_increase=0.05, max_p99_increase=0.5)

    def test_waits_for_enough_candidate_requests(self) -> None:
        verdict = judge(self.policy, Stats(100, 0, 0.01, 0.02), Stats(9, 9, 0.01, 0.02))
        assert verdict.verdict is Verdict.WAIT

    def test_error_rate_margin(self) -> None:
        stable = Stats(100, 10, 0.01, 0.02)
        assert judge(self.policy, stable, Stats(100, 15, 0.01, 0.02)).verdict is Verdict.GOOD
        bad = judge(self.policy, stable, Stats(100, 16, 0.01, 0.02))
        assert bad.verdict is Verdict.BAD
        assert "error rate 16.0%" in bad.reason

    def test_latency_margin(self) -> None:
        stable = Stats(100, 0, 0.010, 0.020)  # allowed: 20 ms + 50 % + 5 ms of slack
        assert judge(self.policy, stable, Stats(50, 0, 0.01, 0.0349)).verdict is Verdict.GOOD
        slow = judge(self.policy, stable, Stats(50, 0, 0.02, 0.0351))
        assert slow.verdict is Verdict.BAD
        assert "p99" in slow.reason

    def test_differences_within_the_slack_are_noise(self) -> None:
        stable = Stats(100, 0, 0.0001, 0.0002)
        assert judge(self.policy, stable, Stats(50, 0, 0.004, 0.0049)).verdict is Verdict.GOOD
        assert judge(self.policy, stable, Stats(50, 0, 0.004, 0.0056)).verdict is Verdict.BAD

    def test_no_stable_traffic_does_not_judge_latency(self) -> None:
        assert judge(self.policy, Stats(), Stats(50, 0, 1.0, 2.0)).verdict is Verdict.GOOD


class TestTraffic:
    def test_empty_slices_are_never_chosen(self) -> None:
        bounds = cumulative([0, 100, 0])
        assert {pick(bounds, p / 1000) for p in range(1000)} == {1}
        assert pick(cumulative([100, 0]), 0.999999) == 0

    def test_weighted_draws_follow_the_weights(self) -> None:
        bounds = cumulative([95, 5])
        rng = random.Random(7)
        n = 100_000
        chosen = sum(pick(bounds, rng.random()) for _ in range(n))
        assert abs(chosen - 0.05 * n) < 4.5 * (n * 0.05 * 0.95) ** 0.5

    def test_subject_points_are_stable_and_spread(self) -> None:
        assert subject_point("fraud", "user-1") == subject_point("fraud", "user-1")
        assert subject_point("fraud", "user-1") != subject_point("other", "user-1")
        points = [subject_point("fraud", f"user-{i}") for i in range(20_000)]
        assert all(0 <= p < 1 for p in points)
        below = sum(p < 0.25 for p in points)
        assert abs(below - 5000) < 4.5 * (20_000 * 0.25 * 0.75) ** 0.5

    def test_a_growing_canary_keeps_its_subjects(self) -> None:
        subjects = [f"user-{i}" for i in range(5000)]
        at = {
            share: {
                s for s in subjects if pick(cumulative([100 - share, share]), subject_point("e", s))
            }
            for share in (5, 25, 50, 100)
        }
        assert at[5] <= at[25] <= at[50] <= at[100] == set(subjects)
        assert 150 < len(at[5]) < 350
