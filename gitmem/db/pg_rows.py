"""PostgreSQL's statements and rows as :mod:`gitmem.db` speaks them: SQLite's placeholders rewritten
(:func:`to_postgres`), rows read by name and position (:class:`Row`, like ``sqlite3.Row``), a
statement's rows fetched before its connection goes back to the pool (:class:`Rows`), and a key's
advisory lock number (:func:`lock_id`). The connections are :mod:`gitmem.db.postgres`'s.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from gitmem.db.interface import Params


@functools.lru_cache(maxsize=1024)
def to_postgres(sql: str) -> str:
    """SQLite's form of a statement in psycopg's: ``?`` outside quotes becomes ``%s``, ``%`` becomes ``%%``."""
    out: list[str] = []
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        out.append("%%" if ch == "%" else ch)
    return "".join(out)


class Row(tuple[Any, ...]):
    """A row read by position and by column name, like ``sqlite3.Row`` (one subclass a column list)."""

    _index: ClassVar[dict[str, int]] = {}  # each subclass (a column list) sets its own

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


# libpq's PGRES_TUPLES_OK (psycopg.pq.ExecStatus.TUPLES_OK): psycopg is imported only when used.
_TUPLES_OK = 2


@functools.lru_cache(maxsize=512)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"_index": {name: i for i, name in enumerate(names)}})


def row_factory(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    result = cursor.pgresult  # the column names without cursor.description's column objects
    names = () if result is None else tuple(result.fname(i).decode() for i in range(result.nfields))
    row_class = _row_class(names)
    return lambda values: row_class(values)


def returns_rows(cursor: Any) -> bool:
    """Whether the cursor's statement returned rows (``cursor.description is not None`` answers the
    same, but builds an object a column: several microseconds a statement, a dozen statements a write)."""
    result = cursor.pgresult
    return result is not None and result.status == _TUPLES_OK


class Rows:
    """A statement's rows, fetched before its connection went back to the pool."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self._next = 0

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rest, self._next = self._rows[self._next :], len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


def run(conn: Any, sql: str, params: Params) -> Rows:
    cursor = conn.execute(to_postgres(sql), tuple(params))
    rows = cursor.fetchall() if returns_rows(cursor) else []
    return Rows(rows, cursor.rowcount)


def run_all(conn: Any, statements: Sequence[tuple[str, Params]], before: Sequence[tuple[str, Any]] = ()) -> list[Rows]:
    """Each statement's rows, all sent in one pipeline (one round trip) after the ``before`` ones."""
    with conn.pipeline():
        for statement in before:
            conn.execute(*statement)
        cursors = [conn.execute(to_postgres(sql), tuple(params)) for sql, params in statements]
    return [Rows(c.fetchall() if returns_rows(c) else [], c.rowcount) for c in cursors]


def lock_id(key: str) -> int:
    """A key's 64-bit advisory lock number (signed, as PostgreSQL's ``bigint``)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)
