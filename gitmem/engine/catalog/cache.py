"""Catalog values a process keeps between requests, only while it hears of every change to them.

The catalog is read afresh by default: a key revoked or a store archived by any process holds in
every other at once. On PostgreSQL every change the catalog announces (:meth:`Catalog.changed`) also
reaches each node through ``LISTEN/NOTIFY`` within milliseconds, so a value that a write reads each
time (is the store archived? does anyone listen to its workspace's note events?) can be kept until
its row changes. :class:`CatalogCache` keeps such values:

- only while :meth:`Database.delivers_changes` (PostgreSQL with its listening connection up; never
  SQLite, whose other processes announce nothing here): otherwise every call reads;
- dropped when a change of its kind and key is announced, here (right after the commit) or by
  another node, and all dropped when notifications may have been missed (a reconnect);
- not kept if a change was announced while it was being read (it may predate the change).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from gitmem.db import Database

Listener = Callable[[str, str], None]  # (kind, key) of a change announced

T = TypeVar("T")

# Values kept, the most recently read: one a store, so 10,000 stores touched would keep 10,000 (issue 27).
VALUES_KEPT = 4096


class CatalogCache:
    """``db``: where the catalog lives; ``subscribe``: registers a listener of every change the catalog
    announces (:meth:`Catalog.on_change`)."""

    def __init__(self, db: Database, subscribe: Callable[[Listener], None]) -> None:
        self._db = db
        self._subscribe = subscribe
        self._values: OrderedDict[tuple[str, str], object] = OrderedDict()
        self._changes = 0  # announcements heard so far
        self._lock = threading.Lock()
        self._listening = False

    def get(self, kind: str, key: str, read: Callable[[], T]) -> T:
        """The value of ``read()``, kept until a ``kind`` change of ``key`` is announced."""
        if not self._listening:
            self._listen()
        if not self._db.delivers_changes():
            return read()
        with self._lock:
            if (kind, key) in self._values:
                self._values.move_to_end((kind, key))
                return self._values[(kind, key)]  # type: ignore[return-value]
            heard = self._changes
        value = read()
        with self._lock:
            if self._changes == heard and self._db.delivers_changes():
                self._values[(kind, key)] = value
                while len(self._values) > VALUES_KEPT:
                    self._values.popitem(last=False)
        return value

    def _listen(self) -> None:
        with self._lock:
            if self._listening:
                return
            self._listening = True
        self._subscribe(self._changed)

    def _changed(self, kind: str, key: str) -> None:
        with self._lock:
            self._changes += 1
            if kind == "*":
                self._values.clear()
            else:
                self._values.pop((kind, key), None)
