"""``RuleModerator``: a policy's word lists and patterns, case-insensitive, words matched
whole (on word boundaries). Compiled patterns are kept per policy version."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from modelport.errors import InvalidInput
from modelport.moderation.strictness import rule_disposition
from modelport.moderation.types import ALLOWED, Decision, Disposition, Policy, Rule, worst


def compile_rule(rule: Rule) -> re.Pattern[str]:
    """One case-insensitive expression for the rule's words (whole words) and patterns;
    ``InvalidInput`` (``invalid_pattern``) for a pattern that is not a regular
    expression."""
    parts = [rf"(?<!\w){re.escape(word)}(?!\w)" for word in rule.words if word]
    for pattern in rule.patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InvalidInput(
                f"rule {rule.category!r}: pattern {pattern!r} is not a regular expression: {exc}",
                code="invalid_pattern",
            ) from None
        parts.append(f"(?:{pattern})")
    if not parts:
        return re.compile(r"(?!x)x")  # matches nothing
    return re.compile("|".join(parts), re.IGNORECASE)


@lru_cache(maxsize=256)
def _compiled(rules: tuple[Rule, ...]) -> tuple[tuple[Rule, re.Pattern[str]], ...]:
    return tuple((rule, compile_rule(rule)) for rule in rules)


class RuleModerator:
    """Blocks or flags texts matching a policy's rules, by the rule's severity and the
    policy's strictness (``moderation.strictness``)."""

    async def moderate(self, texts: Sequence[str], policy: Policy) -> Decision:
        return self.judge(texts, policy)

    def judge(self, texts: Sequence[str], policy: Policy) -> Decision:
        """The same, without awaiting: pure CPU work."""
        disposition = Disposition.ALLOWED
        categories: list[str] = []
        reasons: list[str] = []
        for rule, pattern in _compiled(policy.rules):
            verdict = rule_disposition(policy.strictness, rule.severity)
            if verdict is Disposition.ALLOWED:
                continue
            for text in texts:
                found = pattern.search(text)
                if found is None:
                    continue
                disposition = worst(disposition, verdict)
                if rule.category not in categories:
                    categories.append(rule.category)
                reasons.append(f"{rule.category}: matched {found.group(0)!r}")
                break
        if disposition is Disposition.ALLOWED:
            return ALLOWED
        return Decision(disposition, "; ".join(reasons), tuple(categories))
