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
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MAX_TERMS = 64  # more ANDed terms than this match nothing in practice; it bounds FTS5's work
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


def _terms(query: str) -> list[Term | str]:
    """Terms in order, with the string ``"OR"`` where a bare OR stands."""
    out: list[Term | str] = []
    for match in _PIECE.finditer(query.replace("\x00", " ")):
        phrase, phrase_star, word = match.groups()
        if word is None:
            text, prefix = _clean(phrase), bool(phrase_star)
        elif word == "OR":
            out.append("OR")
            continue
        else:
            stripped = word.rstrip("*")
            text = _clean(stripped)
            prefix = stripped != word and _is_token_char(stripped[-1:] or " ")
        if text:
            out.append(Term(text, prefix))
    return out


def groups(query: str) -> list[list[Term]]:
    """ANDed groups of ORed terms. An OR with no term on one side is dropped."""
    result: list[list[Term]] = []
    joining = False
    for item in _terms(query):
        if item == "OR":
            joining = bool(result)
            continue
        assert isinstance(item, Term)
        if joining:
            result[-1].append(item)
        else:
            result.append([item])
        joining = False
    return result[:MAX_TERMS]


def to_fts(query: str) -> str | None:
    """The FTS5 MATCH expression for ``query``, or ``None`` when it holds no searchable word."""
    parts = []
    for group in groups(query):
        alternatives = " OR ".join(term.fts() for term in group[:MAX_TERMS])
        parts.append(alternatives if len(group) == 1 else f"({alternatives})")
    return " AND ".join(parts) if parts else None


__all__ = ["MAX_TERMS", "Term", "groups", "to_fts"]
