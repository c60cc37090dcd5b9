"""What each strictness flags and blocks: rule severities and classifier thresholds.

| strictness | rules: blocks | rules: flags | classifier: flags at | blocks at |
|---|---|---|---|---|
| off | nothing (not moderated) | | | |
| low | high severity | medium | 0.7 | 0.9 |
| medium | medium, high | low | 0.4 | 0.7 |
| high | every match | | 0.2 | 0.4 |
"""

from __future__ import annotations

from modelport.moderation.types import Disposition, Severity, Strictness, Threshold

_BLOCK_FROM = {Strictness.LOW: Severity.HIGH, Strictness.MEDIUM: Severity.MEDIUM}
_FLAG_FROM = {Strictness.LOW: Severity.MEDIUM, Strictness.MEDIUM: Severity.LOW}

THRESHOLDS = {
    Strictness.LOW: Threshold(flag=0.7, block=0.9),
    Strictness.MEDIUM: Threshold(flag=0.4, block=0.7),
    Strictness.HIGH: Threshold(flag=0.2, block=0.4),
}


def rule_disposition(strictness: Strictness, severity: Severity) -> Disposition:
    """What a rule match of ``severity`` does under ``strictness``."""
    if strictness is Strictness.OFF:
        return Disposition.ALLOWED
    if strictness is Strictness.HIGH or severity >= _BLOCK_FROM[strictness]:
        return Disposition.BLOCKED
    if severity >= _FLAG_FROM[strictness]:
        return Disposition.FLAGGED
    return Disposition.ALLOWED


def score_disposition(threshold: Threshold, score: float) -> Disposition:
    """What a classifier's score does against ``threshold``."""
    if score >= threshold.block:
        return Disposition.BLOCKED
    if score >= threshold.flag:
        return Disposition.FLAGGED
    return Disposition.ALLOWED
