"""The catalog of datasets and prompt templates: listed and searched as the caller may
read them, with a facet per kind, task and license.

A parallel search to the models' (``registry.catalog``), not folded into it: a model's
rank comes from an index tuned and benchmarked on models alone (``bench/search_bench.py``),
whose facets (format, price band, score) mean nothing for a dataset; and the assets'
visibility is decided by ``AssetAccess`` on each asset's facts, the rule the assets'
own routes use. Datasets and templates number in the hundreds where models number in
the hundred thousands, so the caller's visible assets are read (``visible_listing``)
and matched here, the same way on SQLite and PostgreSQL.

The words are the models' (``registry.search_terms``): runs of letters and digits, at
most eight, every one must match a word of the asset (the last also as a prefix). An
asset's words are its owner and name, its kind, task and license, its description and
its latest version's manifest description. The rank: the name *is* the query's words,
then every word in the name, then a weighted count (name 10, kind/task/license 4,
description 1, manifest 0.5), then kind, owner and name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from modelport.errors import InvalidInput
from modelport.registry.search_terms import SearchTerms, parse_terms, words_of
from modelport.tenancy.types import Principal

KINDS = ("dataset", "template")
MAX_PAGE = 200
FACETS = ("kind", "task", "license")


@dataclass(frozen=True)
class AssetEntry:
    """One asset as the catalog lists it (its latest version's facts)."""

    kind: str
    owner: str
    name: str
    visibility: str
    description: str
    version: str | None
    task: str | None
    license: str | None
    card: str
    """The latest version's manifest description."""

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}"


class Listed(Protocol):
    """A kind of asset whose entries the caller may read (``AssetCatalog.entries``)."""

    kind: str

    def entries(self, principal: Principal) -> list[AssetEntry]: ...


@dataclass(frozen=True)
class AssetPage:
    items: list[AssetEntry]
    next_cursor: str | None
    total: int
    facets: dict[str, list[tuple[str, int]]]


@dataclass(frozen=True)
class Filters:
    kind: str | None = None
    task: str | None = None
    license: str | None = None

    def keeps(self, entry: AssetEntry, *, but: str | None = None) -> bool:
        """Whether ``entry`` passes every filter (but the facet ``but``)."""
        return all(
            wanted is None or facet == but or (_value(entry, facet) or "").lower() == wanted
            for facet, wanted in (
                ("kind", self.kind),
                ("task", self.task),
                ("license", self.license),
            )
        )


def _value(entry: AssetEntry, facet: str) -> str | None:
    return {"kind": entry.kind, "task": entry.task, "license": entry.license}[facet]


def _rank(entry: AssetEntry, terms: SearchTerms) -> tuple[int, float] | None:
    """(tier, score) when every word matches, None otherwise."""
    name = words_of(entry.name)
    fields = (
        (words_of(f"{entry.owner} {entry.name}"), 10.0),
        (words_of(f"{entry.kind} {entry.task or ''} {entry.license or ''}"), 4.0),
        (words_of(entry.description), 1.0),
        (words_of(entry.card), 0.5),
    )
    last = len(terms.words) - 1
    score = 0.0
    in_name = 0
    for i, word in enumerate(terms.words):

        def hit(candidate: str, i: int = i, word: str = word) -> bool:
            return candidate == word or (i == last and candidate.startswith(word))

        found = [weight * sum(map(hit, words)) for words, weight in fields]
        if not any(found):
            return None
        score += sum(found)
        in_name += any(map(hit, name))
    tier = 2 if " ".join(name) == terms.key else 1 if in_name == len(terms.words) else 0
    return tier, score


class AssetSearch:
    """Datasets and templates in one catalog (see the module docstring)."""

    def __init__(self, catalogs: Sequence[Listed]) -> None:
        self.catalogs = {catalog.kind: catalog for catalog in catalogs}

    def search(
        self,
        principal: Principal,
        *,
        q: str | None = None,
        kind: str | None = None,
        task: str | None = None,
        license: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> AssetPage:
        """A page of the assets the caller may read that match ``q`` and the filters
        (ranked with ``q``; by kind, owner and name without), the total and the facets
        (each counted under every filter but its own)."""
        offset = _offset(cursor)
        limit = max(1, min(limit, MAX_PAGE))
        filters = Filters(*(None if v is None else v.lower() for v in (kind, task, license)))
        terms = parse_terms(q)
        entries = [e for c in self.catalogs.values() for e in c.entries(principal)]
        if q and q.strip() and terms is None:
            entries = []  # only punctuation: nothing to find
        ranked: list[tuple[tuple[int, float], AssetEntry]] = []
        for entry in entries:
            rank = (0, 0.0) if terms is None else _rank(entry, terms)
            if rank is not None:
                ranked.append((rank, entry))
        ranked.sort(key=lambda r: (-r[0][0], -r[0][1], r[1].kind, r[1].owner, r[1].name))
        facets: dict[str, list[tuple[str, int]]] = {}
        for facet in FACETS:
            counts = Counter(
                value
                for _, e in ranked
                if filters.keeps(e, but=facet) and (value := _value(e, facet)) is not None
            )
            facets[facet] = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        matched = [e for _, e in ranked if filters.keeps(e)]
        page = matched[offset : offset + limit]
        more = offset + limit < len(matched)
        return AssetPage(page, str(offset + limit) if more else None, len(matched), facets)


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 9:
        raise InvalidInput(
            "invalid cursor: pass back the next_cursor of a previous page",
            code="invalid_cursor",
            field="cursor",
        )
    return int(cursor)
