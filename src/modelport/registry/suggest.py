""" "Did you mean": queries close to one that found nothing, from the names the viewer sees.

Each query word that matches nothing the viewer may read is replaced by the nearest word
(Levenshtein distance, at most ``max_distance``) of the visible models' names that share
its first two letters; the index finds those names by prefix, so no scan of the catalog
is made. A typo in the first two letters is not corrected. Words come only from names
the viewer may read, so a suggestion never reveals a private model.
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from modelport.registry.search_index import SearchIndex
from modelport.registry.search_terms import SearchTerms, words_of
from modelport.store.tables import ModelRow

MAX_SUGGESTIONS = 3
MAX_CANDIDATE_NAMES = 2_000
MIN_WORD = 3


def max_distance(word: str) -> int:
    """Edits allowed for a word: one up to four letters, two beyond."""
    return 1 if len(word) <= 4 else 2


def suggestions(
    session: Session,
    index: SearchIndex,
    terms: SearchTerms,
    visible: ColumnElement[bool] | None,
) -> tuple[str, ...]:
    """Up to ``MAX_SUGGESTIONS`` corrected queries, best first; () when none is near."""
    choices: list[list[str]] = []
    corrected = False
    for word in terms.words:
        if len(word) < MIN_WORD or _found(session, index, word, visible):
            choices.append([word])
            continue
        near = _nearest(word, _vocabulary(session, index, word[:2], visible))
        if not near:
            choices.append([word])
            continue
        corrected = True
        choices.append(near)
    if not corrected:
        return ()
    out: list[str] = []
    for rank in range(MAX_SUGGESTIONS):
        text = " ".join(c[min(rank, len(c) - 1)] for c in choices)
        if text not in out:
            out.append(text)
    return tuple(out)


def _found(
    session: Session, index: SearchIndex, word: str, visible: ColumnElement[bool] | None
) -> bool:
    hits = index.hits(SearchTerms((word,)))
    stmt = select(ModelRow.id).join(hits, hits.c.model_id == ModelRow.id).limit(1)
    if visible is not None:
        stmt = stmt.where(visible)
    return session.scalar(stmt) is not None


def _vocabulary(
    session: Session, index: SearchIndex, prefix: str, visible: ColumnElement[bool] | None
) -> Counter[str]:
    named = index.name_prefix(prefix)
    stmt = (
        select(ModelRow.name)
        .join(named, named.c.model_id == ModelRow.id)
        .limit(MAX_CANDIDATE_NAMES)
    )
    if visible is not None:
        stmt = stmt.where(visible)
    words: Counter[str] = Counter()
    for name in session.scalars(stmt):
        words.update(w for w in words_of(name) if w.startswith(prefix))
    return words


def _nearest(word: str, vocabulary: Counter[str]) -> list[str]:
    """The vocabulary's words within reach of ``word``: nearest first, then the most
    used, then alphabetical."""
    limit = max_distance(word)
    scored = []
    for candidate, uses in vocabulary.items():
        if abs(len(candidate) - len(word)) > limit:
            continue
        distance = levenshtein(word, candidate, limit)
        if distance <= limit:
            scored.append((distance, -uses, candidate))
    return [c for _, _, c in sorted(scored)[:MAX_SUGGESTIONS]]


def levenshtein(a: str, b: str, limit: int) -> int:
    """Edit distance of ``a`` and ``b``, or ``limit + 1`` once it must exceed ``limit``."""
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
            )
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]
