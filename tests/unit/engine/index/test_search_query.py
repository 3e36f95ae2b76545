"""The query translator: any string is a valid FTS5 query or a refusal for its cost (never another
error), a query of words, punctuation, OR and prefixes finds what a simple model of "ANDed groups of
ORed words" finds, and the bounds of one query are exact."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.engine.index.search_query import MAX_PREFIXES, MAX_TERMS, MIN_PREFIX_CHARS, groups, to_fts
from gitmem.errors import InvalidRequest, SearchTooCostly

WORDS = ["cat", "dog", "fox", "owl", "yak", "emu", "cow", "ant"]  # words porter leaves as they are
PUNCTUATION = "-:/()^+,.!?;{}[]#@&|~<>='"


def fts_table(docs: list[list[str]]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(path, body, tokenize='porter unicode61')")
    db.executemany(
        "INSERT INTO t (rowid, path, body) VALUES (?, '', ?)", [(i, " ".join(words)) for i, words in enumerate(docs)]
    )
    return db


def matches(db: sqlite3.Connection, query: str) -> set[int]:
    try:
        expression = to_fts(query)
    except SearchTooCostly:
        return set()
    if expression is None:
        return set()
    return {row[0] for row in db.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,))}


DB = fts_table([["cat", "dog"], ["fox"], ["a", "b", "near"]])


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=300))
def test_any_text_is_a_valid_query(query: str) -> None:
    matches(DB, query)  # no sqlite3.OperationalError, whatever the text


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                '"',
                "*",
                "OR",
                "NEAR",
                "AND",
                "NOT",
                "(",
                ")",
                ":",
                "-",
                "^",
                "\x00",
                "🎉",
                "cat",
                "do*",
                '"cat dog"',
                "a",
                "+",
            ]
        ),
        max_size=30,
    )
)
def test_fts5_syntax_pieces_in_any_order_are_valid(pieces: list[str]) -> None:
    for glue in (" ", ""):
        matches(DB, glue.join(pieces))


def refusal(query: str) -> str:
    with pytest.raises(SearchTooCostly) as refused:
        to_fts(query)
    assert isinstance(refused.value, InvalidRequest)  # a 400 on every surface
    return refused.value.message


def test_a_query_has_at_most_64_terms_in_all_its_groups() -> None:
    assert (MAX_TERMS, MAX_PREFIXES, MIN_PREFIX_CHARS) == (64, 8, 2)
    for most in (" ".join(["word"] * 64), " OR ".join(["word"] * 64), "a OR b " * 16 + "c " * 32):
        assert sum(len(group) for group in groups(most)) == MAX_TERMS
    message = (
        "this search has more than 64 terms; a search may have at most 64 (words, phrases and prefixes,"
        " OR alternatives included)"
    )
    for past in (" ".join(["word"] * 65), " OR ".join(["word"] * 40_000), "a OR b " * 32 + "c"):
        assert refusal(past) == message
    assert refusal(" ".join(["word"] * 5000) + " " + "x* " * 100) == message  # read no further
    assert to_fts(" ".join(["word"] * 64) + " - * ! OR") is not None  # what is not a term is not counted


def test_a_query_has_at_most_8_prefixes_of_2_letters_or_more() -> None:
    assert to_fts(" OR ".join(f"{a}{b}*" for a, b in zip("abcdefgh", "aeiouaei", strict=True))) is not None
    assert refusal(" ".join(f"p{i}*" for i in range(9))) == (
        "this search has more than 8 prefixes (word*); a search may have at most 8"
    )
    short = "the prefix s* is too short: a prefix needs at least 2 letters or digits before the *"
    for query in ("s*", "deploy OR s*", '"sam s"*', "sam-s*"):
        assert refusal(query) == short, query
    assert refusal("ab* 7*").startswith("the prefix 7* is too short")  # a digit counts as a letter does
    assert to_fts('sa* "sam st"* 42*') == '"sa"* AND "sam st"* AND "42"*'
    assert to_fts("s") == '"s"' and to_fts("s *") == '"s"'  # a star alone makes no prefix


term = st.tuples(
    st.sampled_from(WORDS),
    st.booleans(),
    st.text(alphabet=PUNCTUATION, max_size=2),
    st.text(alphabet=PUNCTUATION, max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=8),
    query=st.lists(st.tuples(term, st.booleans()), min_size=1, max_size=5),
)
def test_words_punctuation_prefixes_and_or_match_a_simple_model(
    docs: list[list[str]], query: list[tuple[tuple[str, bool, str, str], bool]]
) -> None:
    # Each term: a word, maybe cut to a prefix with '*', wrapped in punctuation; joined by OR or a space.
    text_parts: list[str] = []
    model: list[list[tuple[str, bool]]] = []
    for i, ((word, prefix, before, after), joined_by_or) in enumerate(query):
        core = word[:2] + "*" if prefix else word
        text_parts.append(("OR " if joined_by_or and i else "") + before + core + (after if not prefix else ""))
        alternative = (word[:2] if prefix else word, prefix)
        if joined_by_or and model:
            model[-1].append(alternative)
        else:
            model.append([alternative])

    def has(doc: list[str], alternative: tuple[str, bool]) -> bool:
        text, prefix = alternative
        return any(w.startswith(text) if prefix else w == text for w in doc)

    expected = {i for i, doc in enumerate(docs) if all(any(has(doc, a) for a in group) for group in model)}
    assert matches(fts_table(docs), " ".join(text_parts)) == expected


def test_examples() -> None:
    assert to_fts("hello world") == '"hello" AND "world"'
    assert to_fts('"a phrase" pre*') == '"a phrase" AND "pre"*'
    assert to_fts("python OR ruby tips") == '("python" OR "ruby") AND "tips"'
    assert to_fts("foo-bar a:b") == '"foo bar" AND "a b"'
    assert to_fts("NEAR(x y)") == '"NEAR x" AND "y"'
    for nothing in ("", "*", "-", '"', "OR", "🎉", "\x00"):
        assert to_fts(nothing) is None
