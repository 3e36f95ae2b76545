"""What :mod:`gitmem.engine.open_stores` is made of below its cache: a store's handle (:class:`Handle`,
counted users, whether it is retired or closed), the lease scopes that return handles
(:func:`leases`), and the one thread a process that closes them off a request's time
(:data:`sweeper`). The design is argued in :mod:`gitmem.engine.open_stores`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

log = logging.getLogger("gitmem.engine.open_stores")  # what an operator has always seen it as

SWEEP_SECONDS = 1.0
MAX_CLOSE_BACKLOG = 8  # evicted stores waiting for the sweeper before the evicting request closes them


class Handle:
    """One open store in a cache: the store, who uses it, and where it is in its life."""

    __slots__ = ("__weakref__", "closed", "key", "last_used", "pinned", "retired", "store", "users")

    def __init__(self, key: str, store: MemoryStore, now: float) -> None:
        self.key = key
        self.store = store
        self.users = 0
        self.last_used = now
        self.retired = False  # out of the LRU: closed by its last user's return
        self.closed = False
        self.pinned = False  # lent outside any lease scope: never closed by the cache

    @property
    def idle(self) -> bool:
        return self.users == 0 and not self.pinned

    def close(self) -> None:
        """Close the store (its caller has taken it out of every cache)."""
        try:
            self.store.close()
        except Exception:  # a store that fails to close must not fail the request that evicted it
            log.warning("closing store %s failed", self.key, exc_info=True)


class Lender(Protocol):
    """What lends handles: a cache, which takes each back when the scope ends."""

    def checkin(self, entry: Handle) -> None: ...

    def sweep(self) -> int: ...


class _Scope:
    """The stores lent within one :func:`leases` block."""

    def __init__(self) -> None:
        self.held: list[tuple[Lender, Handle]] = []
        self.lock = threading.Lock()

    def add(self, cache: Lender, entry: Handle) -> None:
        with self.lock:
            self.held.append((cache, entry))

    def release(self) -> None:
        with self.lock:
            held, self.held = self.held, []
        for cache, entry in held:
            cache.checkin(entry)


_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("gitmem_store_leases", default=None)


def lend(cache: Lender, entry: Handle) -> bool:
    """Lend ``entry`` to the current lease scope; False if there is none (then it is the caller's for
    the life of the process)."""
    scope = _scope.get()
    if scope is None:
        return False
    scope.add(cache, entry)
    return True


@contextlib.contextmanager
def leases() -> Iterator[None]:
    """Every store ``Gitmem.store`` lends inside this block (in this context, and in the threads it
    hands work to with the context copied) is returned when the block ends."""
    scope = _Scope()
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)
        scope.release()


class _Sweeper:
    """One thread a process that closes every cache's idle stores each :data:`SWEEP_SECONDS`."""

    def __init__(self) -> None:
        self._caches: weakref.WeakSet[Lender] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closing: list[Handle] = []
        self._closing_lock = threading.Lock()  # held while a batch of _closing is being closed
        self._wake = threading.Event()

    def close_later(self, entries: list[Handle]) -> None:
        """Close ``entries`` (out of every cache already) in the sweeper's thread, at once; if it is
        behind (it shares the interpreter with every request thread), the caller closes the backlog
        itself: stores waiting to be closed still hold their descriptors."""
        if entries:
            with self._lock:
                self._closing.extend(entries)
                behind = len(self._closing) > MAX_CLOSE_BACKLOG
            if behind:
                self.drain()
            else:
                self._wake.set()

    def watch(self, cache: Lender) -> None:
        with self._lock:
            self._caches.add(cache)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="gitmem-open-stores", daemon=True)
                self._thread.start()

    def drain(self) -> None:
        """Close what waits to be closed now, and wait for a batch being closed (a home closing)."""
        with self._closing_lock:
            with self._lock:
                closing, self._closing = self._closing, []
            for entry in closing:
                entry.close()

    def _run(self) -> None:
        while True:
            self._wake.wait(SWEEP_SECONDS)
            self._wake.clear()
            self.drain()
            with self._lock:
                caches = list(self._caches)
            for cache in caches:
                try:
                    cache.sweep()
                except Exception:  # housekeeping: the next sweep tries again
                    log.warning("closing idle stores failed", exc_info=True)
            del caches


sweeper = _Sweeper()


__all__ = ["MAX_CLOSE_BACKLOG", "SWEEP_SECONDS", "Handle", "Lender", "leases", "lend", "sweeper"]
