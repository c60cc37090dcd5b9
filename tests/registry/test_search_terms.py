"""Query text to search terms and match expressions (pure), and the suggestions' distance."""

from __future__ import annotations

import pytest

from modelport.registry.search_terms import (
    MAX_TERMS,
    SearchTerms,
    fts5_match,
    parse_terms,
    tsquery,
)
from modelport.registry.suggest import levenshtein, max_distance


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Fraud-Risk", ("fraud", "risk")),
        ('"sentiment" OR name:x*', ("sentiment", "or", "name", "x")),
        ("a_b.c/d", ("a", "b", "c", "d")),
        ("'); DROP TABLE models; --", ("drop", "table", "models")),
        ("Übersetzer 2", ("übersetzer", "2")),
    ],
)
def test_only_letters_and_digits_survive(text: str, words: tuple[str, ...]) -> None:
    terms = parse_terms(text)
    assert terms is not None and terms.words == words


@pytest.mark.parametrize("text", [None, "", "   ", '"', "*:&|!()", "___"])
def test_no_words_is_no_query(text: str | None) -> None:
    assert parse_terms(text) is None


def test_long_queries_keep_their_first_words() -> None:
    terms = parse_terms(" ".join(f"w{i}" for i in range(20)))
    assert terms is not None and len(terms.words) == MAX_TERMS


def test_match_expressions_quote_every_word() -> None:
    terms = SearchTerms(("fraud", "ri"))
    assert fts5_match(terms) == '"fraud" "ri"*'
    assert fts5_match(terms, column="name") == 'name : ("fraud" "ri"*)'
    assert tsquery(terms) == "'fraud' & 'ri':*"
    assert tsquery(terms, weights="A") == "'fraud':A & 'ri':*A"


def test_the_key_is_the_words() -> None:
    assert SearchTerms(("fraud", "risk", "v2")).key == "fraud risk v2"


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("sentiment", "sentiment", 0),
        ("sentimnt", "sentiment", 1),
        ("sentimnet", "sentiment", 2),
        ("fruad", "fraud", 2),
        ("abc", "xyz", 3),
    ],
)
def test_levenshtein(a: str, b: str, distance: int) -> None:
    assert levenshtein(a, b, 5) == distance
    assert levenshtein(a, b, 1) == min(distance, 2)


def test_longer_words_allow_more_edits() -> None:
    assert (max_distance("bert"), max_distance("fraud")) == (1, 2)
