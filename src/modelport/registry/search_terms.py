"""A catalog query's text as search terms that no index can read as syntax.

Only runs of letters and digits survive: quotes, operators (``AND``, ``-``, ``*``,
``:``, ``&``, ``|``, ``NEAR``, parentheses) and column filters become separators, so a
query is always a plain conjunction of words. Each backend then writes its own match
expression from the words, quoting each one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TERMS = 8
"""Words past this many are dropped: a longer query narrows nothing useful and costs a
scan per word."""
MAX_WORD = 64

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class SearchTerms:
    words: tuple[str, ...]
    """Lower-case words, every one of which a match must contain (the last as a prefix)."""

    @property
    def key(self) -> str:
        """The words joined by spaces: compared with a model's name spelt as words
        (``fraud-risk`` as ``fraud risk``) to find the exact name."""
        return " ".join(self.words)


def words_of(text: str) -> list[str]:
    """The lower-case letter-and-digit runs of ``text``."""
    return [w[:MAX_WORD] for w in _WORD.findall(text.lower())]


def parse_terms(text: str | None) -> SearchTerms | None:
    """The words of a query; None when it has none (empty, blank, only punctuation)."""
    words = words_of(text or "")[:MAX_TERMS]
    return SearchTerms(tuple(words)) if words else None


def fts5_match(terms: SearchTerms, *, column: str | None = None) -> str:
    """An SQLite FTS5 MATCH expression: each word quoted, the last a prefix."""
    quoted = [f'"{w}"' for w in terms.words]
    quoted[-1] += "*"
    expression = " ".join(quoted)
    return f"{column} : ({expression})" if column else expression


def tsquery(terms: SearchTerms, *, weights: str = "") -> str:
    """A PostgreSQL ``to_tsquery`` text: each word quoted, ANDed, the last a prefix."""
    parts = [f"'{w}'{(':' + weights) if weights else ''}" for w in terms.words]
    parts[-1] = f"'{terms.words[-1]}':*{weights}"
    return " & ".join(parts)
