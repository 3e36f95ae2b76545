"""A search box's query turned into a safe SQLite FTS5 expression.

Users type words; FTS5's own syntax (``-``, ``:``, ``NEAR``, ``^``, parentheses, a lone ``*``, stray
quotes) would be an error or a surprise. So the query is tokenised here and every term is sent as a
quoted FTS5 string, which FTS5 only ever tokenises, never parses. What keeps a meaning:

- words are ANDed;
- ``"a phrase"`` (balanced double quotes) is a phrase;
- ``word*`` (and ``"a phr"*``) is a prefix;
- ``OR`` between two terms is an alternative and binds tighter than the implicit AND, as in a web
  search box: ``python OR ruby tips`` is ``(python OR ruby) AND tips``.

Everything else is text: punctuation separates words, an unbalanced quote or an ``OR`` with nothing on
one side is ignored or searched as a word, and terms that hold no letter or digit are dropped.

**What a query may cost** is bounded here, for both engines (FTS5 and PostgreSQL's ``tsquery``), so
every surface (REST, MCP, the web view, the CLI) refuses the same queries with the same
:class:`~gitmem.errors.SearchTooCostly` (400): at most :data:`MAX_TERMS` terms in all (the OR
alternatives of every group counted), at most :data:`MAX_PREFIXES` of them prefixes, and no prefix
shorter than :data:`MIN_PREFIX_CHARS` (``a*`` stands for most of the store's vocabulary; ANDed groups
of such alternatives cost seconds to minutes of CPU on a few thousand notes). What a query within those
bounds may still cost on a big store is the engine's time budget (:mod:`gitmem.engine.index.search`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from gitmem.errors import SearchTooCostly

MAX_TERMS = 64  # terms a query, in all its groups (a group of 40,000 was PostgreSQL's stack overflow)
MAX_PREFIXES = 8  # prefix terms (word*) a query: each stands for every word it begins
MIN_PREFIX_CHARS = 2  # letters or digits a prefix's last word needs before its *
_PIECE = re.compile(r'"([^"]*)"(\*?)|([^\s"]+)')


@dataclass(frozen=True)
class Term:
    """One quoted FTS5 string: a word or phrase, the last token a prefix when ``prefix``."""

    text: str
    prefix: bool = False

    def fts(self) -> str:
        return '"' + self.text.replace('"', '""') + '"' + ("*" if self.prefix else "")


def _is_token_char(char: str) -> bool:
    # unicode61's token characters: letters, numbers and private-use characters.
    category = unicodedata.category(char)
    return category[0] in "LN" or category == "Co"


def _clean(text: str) -> str:
    """The text with every non-token character made a space (so FTS5 sees only words)."""
    return " ".join("".join(c if _is_token_char(c) else " " for c in text).split())


def _terms(query: str) -> Iterator[Term | str]:
    """Terms in order, with the string ``"OR"`` where a bare OR stands."""
    for match in _PIECE.finditer(query.replace("\x00", " ")):
        phrase, phrase_star, word = match.groups()
        if word is None:
            text, prefix = _clean(phrase), bool(phrase_star)
        elif word == "OR":
            yield "OR"
            continue
        else:
            stripped = word.rstrip("*")
            text = _clean(stripped)
            prefix = stripped != word and _is_token_char(stripped[-1:] or " ")
        if text:
            yield Term(text, prefix)


def groups(query: str) -> list[list[Term]]:
    """ANDed groups of ORed terms (an OR with no term on one side is dropped), or
    :class:`~gitmem.errors.SearchTooCostly` for a query past the bounds (read no further than the
    term past :data:`MAX_TERMS`: a megabyte of words costs no more than 65 of them)."""
    result: list[list[Term]] = []
    joining, count, prefixes = False, 0, 0
    for item in _terms(query):
        if item == "OR":
            joining = bool(result)
            continue
        assert isinstance(item, Term)  # noqa: S101  narrows the type for mypy; never a check of input
        count += 1
        if count > MAX_TERMS:
            raise SearchTooCostly(
                f"this search has more than {MAX_TERMS} terms; a search may have at most {MAX_TERMS}"
                " (words, phrases and prefixes, OR alternatives included)"
            )
        if item.prefix:
            prefixes += 1
            _check_prefix(item, prefixes)
        if joining:
            result[-1].append(item)
        else:
            result.append([item])
        joining = False
    return result


def _check_prefix(term: Term, prefixes: int) -> None:
    if prefixes > MAX_PREFIXES:
        raise SearchTooCostly(
            f"this search has more than {MAX_PREFIXES} prefixes (word*); a search may have at most {MAX_PREFIXES}"
        )
    last = term.text.split()[-1]
    if len(last) < MIN_PREFIX_CHARS:
        raise SearchTooCostly(
            f"the prefix {last}* is too short: a prefix needs at least {MIN_PREFIX_CHARS}"
            " letters or digits before the *"
        )


def to_fts(query: str) -> str | None:
    """The FTS5 MATCH expression for ``query``, or ``None`` when it holds no searchable word."""
    parts = []
    for group in groups(query):
        alternatives = " OR ".join(term.fts() for term in group)
        parts.append(alternatives if len(group) == 1 else f"({alternatives})")
    return " AND ".join(parts) if parts else None


__all__ = ["MAX_PREFIXES", "MAX_TERMS", "MIN_PREFIX_CHARS", "Term", "groups", "to_fts"]
