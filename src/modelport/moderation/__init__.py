"""Content moderation: tenants' policies, rule- and model-based moderators, the audit
of every decision (see ``docs/moderation.md``)."""

from modelport.moderation.interface import Classify, Moderator
from modelport.moderation.model import ModelModerator
from modelport.moderation.rules import RuleModerator
from modelport.moderation.service import ContentBlocked, ModerationService
from modelport.moderation.types import (
    Decision,
    Disposition,
    Policy,
    PolicyDraft,
    Rule,
    Severity,
    Stage,
    Strictness,
    Subject,
    Threshold,
)

__all__ = [
    "Classify",
    "ContentBlocked",
    "Decision",
    "Disposition",
    "ModelModerator",
    "ModerationService",
    "Moderator",
    "Policy",
    "PolicyDraft",
    "Rule",
    "RuleModerator",
    "Severity",
    "Stage",
    "Strictness",
    "Subject",
    "Threshold",
]
