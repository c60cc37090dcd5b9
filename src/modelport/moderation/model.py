"""``ModelModerator``: a classifier model's scores against per-category thresholds."""

from __future__ import annotations

import math
from collections.abc import Sequence

from modelport.moderation.interface import Classify
from modelport.moderation.strictness import THRESHOLDS, score_disposition
from modelport.moderation.types import ALLOWED, Decision, Disposition, Policy, Strictness, worst


class ModelModerator:
    """Runs the policy's classifier (through ``classify``) on the texts; each category's
    highest score flags or blocks by the policy's threshold for it (its own, else the
    strictness's)."""

    def __init__(self, classify: Classify) -> None:
        self.classify = classify

    async def moderate(self, texts: Sequence[str], policy: Policy) -> Decision:
        if policy.classifier is None or policy.strictness is Strictness.OFF or not texts:
            return ALLOWED
        outputs = await self.classify(policy.tenant, policy.classifier, texts)
        default = THRESHOLDS[policy.strictness]
        disposition = Disposition.ALLOWED
        categories: list[str] = []
        reasons: list[str] = []
        scores: dict[str, float] = {}
        for category, values in sorted(outputs.items()):
            finite = [float(v) for v in values if math.isfinite(float(v))]
            score = max(finite, default=0.0)
            scores[category] = round(score, 6)
            verdict = score_disposition(policy.thresholds.get(category, default), score)
            if verdict is Disposition.ALLOWED:
                continue
            disposition = worst(disposition, verdict)
            categories.append(category)
            reasons.append(f"{category}: score {score:.3f}")
        return Decision(disposition, "; ".join(reasons), tuple(categories), scores)
