"""The storage interface itself: what both engines provide (see :mod:`gitmem.db`)."""

from __future__ import annotations

import contextlib
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal, Protocol

Dialect = Literal["sqlite", "postgresql"]
Params = Sequence[Any]
CATALOG_LOCK = "gitmem:catalog"
LOCK_TIMEOUT_SECONDS = 30.0  # a lock or a busy database waited for longer than this is an error


class Result(Protocol):
    """What :meth:`Database.execute` returns: ``sqlite3.Cursor`` has this shape, and so does :class:`Rows`."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Transaction(Protocol):
    """The handle ``with db.transaction() as tx`` gives."""

    def execute(self, sql: str, params: Params = ()) -> Result: ...

    def executemany(self, sql: str, rows: Iterable[Params]) -> Result: ...

    def executescript(self, script: str) -> None: ...

    def lock(self, key: str) -> None: ...

    def notify(self, channel: str, payload: str = "") -> None: ...


def sqlite_statements(script: str) -> list[str]:
    """A script cut into whole statements (a trigger's body keeps its own semicolons)."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


class Database(ABC):
    """See the module docstring. One object a process and a database, shared by its threads."""

    dialect: Dialect
    #: What an operator may be shown: a path, or the URL without its password.
    display_name: str

    @abstractmethod
    def execute(self, sql: str, params: Params = ()) -> Result: ...

    @abstractmethod
    def executemany(self, sql: str, rows: Iterable[Params]) -> Result: ...

    @abstractmethod
    def executescript(self, script: str) -> None:
        """Several statements without parameters (schemas), in one transaction."""

    @abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[Transaction]: ...

    @abstractmethod
    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(payload)`` for every notification on ``channel`` committed by any process
        (PostgreSQL) or by this process (SQLite, where no other node exists to tell)."""

    @abstractmethod
    def close(self) -> None: ...

    def delivers_changes(self) -> bool:
        """Whether every notification committed by any process reaches this process's listeners now
        (so a cache kept by listening may be trusted): on PostgreSQL while its listening connection is
        up; never on SQLite, whose other processes tell this one nothing."""
        return False

    def in_transaction(self) -> bool:
        """Whether this thread is inside :meth:`transaction`."""
        return False
