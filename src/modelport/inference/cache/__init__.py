"""The response cache: answers of deterministic versions, reused on the hot path.

``key`` names a question (the version's manifest digest, the digest of the exact input
tensors, the parameters that change the answer, the outputs asked for); ``memory`` and
``redis`` are its two tiers; ``flags`` is what each tenant declared (no-cache, shared);
``cache.ResponseCache`` puts them together under the tenancy rule. ``modelport.app``
builds it; the pipeline's reserve step asks it and its settle step fills it
(``inference.steps``).
"""

from modelport.inference.cache.cache import Lookup, ResponseCache
from modelport.inference.cache.entry import CachedAnswer
from modelport.inference.cache.flags import CacheFlags, TenantCacheFlags
from modelport.inference.cache.key import question_digest
from modelport.inference.cache.memory import MemoryTier
from modelport.inference.cache.redis import RedisTier

__all__ = [
    "CacheFlags",
    "CachedAnswer",
    "Lookup",
    "MemoryTier",
    "RedisTier",
    "ResponseCache",
    "TenantCacheFlags",
    "question_digest",
]
