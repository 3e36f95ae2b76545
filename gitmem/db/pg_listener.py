"""The one connection a process LISTENs on for PostgreSQL's notifications, outside the pool
(:meth:`gitmem.db.postgres.PostgresDatabase.listen`), and the thread that calls the callbacks.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from gitmem.db.interface import LOCK_TIMEOUT_SECONDS

log = logging.getLogger(__name__)


class Listener:
    """One connection that LISTENs for this process, and a thread that calls the callbacks.

    If the connection drops, every callback is called with ``"*"`` (something may have been missed)
    once it is back, so a cache that listens starts afresh rather than trusting what it holds."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.callbacks: dict[str, list[Callable[[str], None]]] = {}
        self.guard = threading.Lock()
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.conn: Any = None
        # True from the moment every channel is listened to and the callbacks have been told to start
        # afresh, until the connection drops: only then is a cache kept by listening up to date.
        self.trusted = False
        self.thread = threading.Thread(target=self._run, name="gitmem-listen", daemon=True)
        self.thread.start()

    def add(self, channel: str, callback: Callable[[str], None]) -> None:
        with self.guard:
            fresh = channel not in self.callbacks
            self.callbacks.setdefault(channel, []).append(callback)
        if fresh:
            self._subscribe([channel])

    def _subscribe(self, channels: Iterable[str]) -> None:
        import psycopg
        from psycopg import sql

        # LISTEN from another thread than the one waiting in notifies(): a second short connection
        # would not do (a listener is per connection), so ask the waiting connection to wake and listen.
        self.ready.wait(LOCK_TIMEOUT_SECONDS)
        with self.guard:
            conn = self.conn
        if conn is None:
            return  # the thread subscribes every channel when it (re)connects
        with contextlib.suppress(psycopg.Error):
            for channel in channels:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

    def _run(self) -> None:
        import psycopg
        from psycopg import sql

        first = True
        while not self.stopping.is_set():
            try:
                conn = psycopg.connect(self.url, autocommit=True)
            except psycopg.Error:
                log.warning("cannot connect to listen for changes; retrying")
                self.stopping.wait(1.0)
                continue
            with self.guard:
                self.conn = conn
                channels = list(self.callbacks)
            try:
                for channel in channels:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                self.ready.set()
                if not first:
                    self._fire_all("*")
                first = False
                self.trusted = True
                while not self.stopping.is_set():
                    for note in conn.notifies(timeout=0.5):
                        self.fire(note.channel, note.payload)
            except psycopg.Error:
                if not self.stopping.is_set():
                    log.warning("the change listener lost its connection; reconnecting")
            finally:
                self.trusted = False
                with self.guard:
                    self.conn = None
                with contextlib.suppress(psycopg.Error):
                    conn.close()

    def fire(self, channel: str, payload: str) -> None:
        for callback in list(self.callbacks.get(channel, ())):
            try:
                callback(payload)
            except Exception:
                log.exception("a listener of %s failed", channel)

    def _fire_all(self, payload: str) -> None:
        for channel in list(self.callbacks):
            self.fire(channel, payload)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)
