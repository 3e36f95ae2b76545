"""The stores a process holds open: a bounded cache of store handles, lent out and returned.

A process may serve any number of stores (a workspace holds up to 1,000; a node any number of
workspaces), but it may hold only so many open files: an open store is an index connection (three
descriptors: the SQLite file, its ``-wal`` and ``-shm``) and a repository handle (its packs mapped in
memory). Before this module every thread kept a store object for every store it had ever opened, so
open files and memory grew with threads × stores touched until ``open()`` failed (issue 27: EMFILE
after ~190 stores under the usual soft limit of 1,024 files, and 500s).

**The design.** One :class:`OpenStores` a home in a process: an LRU of store handles keyed by store id,
each handle shared by every thread (a store's index already gives each thread its own connection and
repository, :mod:`gitmem.engine.index.store_index`). The alternatives measured worse or were not
safe: a per-thread dictionary bounded per thread still multiplies by the threads (40 in the server's
pool); a small pool of connections per open store would need every query of the index to check a
connection out and in (dozens of call sites, each a chance to leak one), where here a thread keeps
the connection it took for as long as the store is lent to anyone and the store alone decides when to
take them back.

- **Lent, never closed under a user.** :meth:`OpenStores.checkout` counts a user; the caller returns
  the handle with :meth:`OpenStores.checkin`. Callers do not do that by hand: ``Gitmem.store`` lends
  the store to the *lease scope* open in the current context (:func:`leases`, a context variable, so a
  request's event-loop code and the worker thread it hops to share one scope), and the scope returns
  everything when it ends. The HTTP middleware opens one a request, the background loops one a store
  visited, the CLI's loops one a store. A store taken outside any scope is lent for the life of the
  process (the CLI's single commands, the library used directly): it is never closed under its caller,
  and it is counted (``pinned``), so a server path that forgets its scope shows in ``/metrics``.
- **When the last user returns it**, the store is *parked*: every thread's connection and repository
  is unbound and one of each kept for the next user. The other connections are closed without a
  checkpoint (the return holds this cache's lock), if at most two: SQLite keeps a closed connection's
  descriptor while another stays open on the file, for its next connection there; past that, all
  are closed (:meth:`gitmem.db.thread_connections.ThreadConnections.park`). A store touched by 40
  threads does not keep 40 connections.
- **Bounded.** Past ``capacity`` open stores the least recently used idle ones are closed, by the
  sweeper's thread (a close checkpoints the index: not on the time of the request that overflowed the
  LRU). Stores in use stay: the LRU exceeds capacity only while more stores than that are in use at
  once. A store evicted explicitly while in use (:meth:`OpenStores.forget`: deleted, or a rotated key)
  is only marked, and closed by its last user's return; a new request meanwhile gets a fresh handle
  (two handles of one store are as safe as two processes). ``capacity`` comes from the open-file limit
  the process actually has (:func:`capacity_for`); a store idle for ``idle_seconds`` is closed too, by
  :meth:`OpenStores.sweep` (one thread a process runs it every second), so a store at rest has no
  connection, hence no ``-wal`` or ``-shm`` beside its index.
- **Out of descriptors is managed, not an error.** Before a cold open, when the process's free
  descriptors fall under a low-water mark, idle stores are closed until there is room; an open that
  fails anyway with EMFILE (as the OS, SQLite or libgit2 report it) closes half the idle stores and
  tries again, and only if nothing can be closed becomes a retryable 503
  (:class:`gitmem.errors.Unavailable`), never a 500.
- **Closing** (:meth:`gitmem.db.thread_connections.ThreadConnections.close`) checkpoints the index's
  log into the file and truncates it before the last connection goes, and frees the repositories'
  packs at once. A store this process closed is not read whole for damage when it reopens it
  (:func:`gitmem.engine.index.sqlite_file.mark_sound`), so a cold open costs a few connections'
  set-up, not a scan.

- **Nothing kept of a closed store.** What the process keeps of a store outside its handle is held
  by the handle or bounded: its group committer (and tree cache), its index's write lock and its page
  tokens' codec are in weak tables its handle keeps alive, so they go when it closes; its packing
  policy, the index files checked whole, the catalog rows read, the stores opened before and the
  approved views are the most recent few thousand (issue 27: each store touched kept ~6 KB, 220 MB
  after 10,000).

The handles, the lease scopes and the sweeper's thread are :mod:`gitmem.engine.store_handles`.

Keys are not cached here: a handle carries its store's codec, and ``Gitmem.store`` checks the key ring
on every checkout of an encrypted store, so a rotated key replaces the handle at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitmem.db.descriptors import descriptor_limit, free_descriptors, low_water, out_of_descriptors, when_short
from gitmem.db.thread_connections import SPARE_DESCRIPTORS
from gitmem.engine.store_handles import Handle, leases, lend, sweeper
from gitmem.errors import Unavailable

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

log = logging.getLogger(__name__)

# An open store: its connection (3), the descriptors of connections its parking closed, a pack, a
# checkpoint's file, room while busy.
DESCRIPTORS_PER_STORE = 3 + SPARE_DESCRIPTORS + 3
RESERVED_DESCRIPTORS = 192  # the catalog's connections (3 a thread), sockets, Git's pipes, logs
MIN_OPEN_STORES = 8
MAX_OPEN_STORES = 256  # however many files the process may open: memory stays bounded too
IDLE_SECONDS = 5.0  # a store unused this long is closed (at rest, it then costs only its files)
OPEN_ATTEMPTS = 4
OPENED_KEPT = 4096


@dataclass(frozen=True)
class OpenStoreStats:
    """What the cache holds now, for ``/metrics`` and ``/readyz``."""

    open_stores: int  # handles open (in the LRU, plus those evicted while in use)
    in_use: int  # handles lent to someone now
    pinned: int  # lent outside any lease scope (never returned)
    capacity: int
    evictions: int  # handles closed to stay within capacity or descriptors, since the process began
    idle_closes: int  # handles closed after idle_seconds unused
    descriptor_limit: int | None  # the soft RLIMIT_NOFILE (None: unlimited or unknown)
    free_descriptors: int | None


def capacity_for(limit: int | None) -> int:
    """Open stores a process with ``limit`` open files may keep: what is left after the reserve, at
    :data:`DESCRIPTORS_PER_STORE` a store, between :data:`MIN_OPEN_STORES` and :data:`MAX_OPEN_STORES`."""
    if limit is None:
        return MAX_OPEN_STORES
    reserve = min(RESERVED_DESCRIPTORS, limit // 2)
    return max(MIN_OPEN_STORES, min(MAX_OPEN_STORES, (limit - reserve) // DESCRIPTORS_PER_STORE))


class OpenStores:
    """A home's open stores in this process (see the module docstring)."""

    def __init__(
        self,
        capacity: int | None = None,
        *,
        idle_seconds: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = descriptor_limit()
        self.capacity = capacity if capacity is not None else capacity_for(self.limit)
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._lru: OrderedDict[str, Handle] = OrderedDict()  # least recently used first
        self._retired: set[Handle] = set()  # evicted while in use
        self._lock = threading.Lock()
        self.evictions = 0
        self.idle_closes = 0
        self._opens_unchecked = 0  # cold opens left before free descriptors are counted again (make_room)
        # Stores opened here before, the most recent only: one a store would grow with every store
        # touched (see opened_before).
        self._opened: OrderedDict[str, None] = OrderedDict()
        sweeper.watch(self)
        when_short(self._relieve)

    def _relieve(self) -> int:
        """Another part of the process ran out of descriptors (a connection to the catalog): close
        half the idle stores."""
        return self.shrink(max(1, len(self._lru) // 2))

    # -- lending ------------------------------------------------------------------------------------

    def checkout(
        self, key: str, open_store: Callable[[], MemoryStore], usable: Callable[[MemoryStore], bool]
    ) -> MemoryStore:
        """The open handle of ``key`` (opened with ``open_store`` if there is none, or if ``usable``
        says the one there is stale), lent to the current lease scope."""
        entry = self._take(key)
        if entry is not None and not usable(entry.store):
            self._retire(entry)
            self.checkin(entry)
            entry = None
        if entry is None:
            entry = self._add(key, self._open(open_store))
            with self._lock:
                self._opened[key] = None
                while len(self._opened) > OPENED_KEPT:
                    self._opened.popitem(last=False)
        if not lend(self, entry):
            with self._lock:
                entry.pinned = True  # lent for the life of the process
                entry.users -= 1
        return entry.store

    def checkin(self, entry: Handle) -> None:
        """One user of ``entry`` is done with it: parked when it was the last, closed if retired."""
        with self._lock:
            entry.users -= 1
            entry.last_used = self._clock()
            if entry.users > 0 or entry.closed:
                return
            if entry.pinned:  # its unscoped holders may still use it: left to the garbage collector
                self._retired.discard(entry)
                return
            if not entry.retired:
                entry.store.park()  # under the lock: no checkout may hand it out half parked
                return
            self._retired.discard(entry)
            entry.closed = True
        entry.close()

    def _take(self, key: str) -> Handle | None:
        with self._lock:
            entry = self._lru.get(key)
            if entry is not None:
                entry.users += 1
                self._lru.move_to_end(key)
            return entry

    def _add(self, key: str, store: MemoryStore) -> Handle:
        with self._lock:
            entry = self._lru.get(key)
            if entry is not None:  # another thread opened it meanwhile: use theirs
                entry.users += 1
                self._lru.move_to_end(key)
                spare: MemoryStore | None = store
            else:
                entry = self._lru[key] = Handle(key, store, self._clock())
                entry.users = 1
                spare = None
            victims = self._over_capacity()
        if spare is not None:
            spare.close()
        sweeper.close_later(victims)  # a close checkpoints the index: not on this request's time
        return entry

    def _open(self, open_store: Callable[[], MemoryStore]) -> MemoryStore:
        """Open a store, making room first when descriptors run low, and again on EMFILE."""
        self.make_room()
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            try:
                return open_store()
            except Exception as exc:
                if not out_of_descriptors(exc):
                    raise
                closed = self.shrink(max(1, len(self._lru) // 2))
                log.warning(
                    "out of file descriptors opening a store (attempt %d); closed %d idle stores", attempt, closed
                )
                if closed == 0:
                    time.sleep(0.05 * attempt)  # the requests holding stores finish and return them
        raise Unavailable("the server has too many files open just now; retry shortly")

    # -- closing ------------------------------------------------------------------------------------

    def _retire(self, entry: Handle) -> None:
        """Take ``entry`` out of the LRU (caller holds a use of it, so it is closed on return)."""
        with self._lock:
            if self._lru.get(entry.key) is entry:
                del self._lru[entry.key]
            if not entry.closed:
                entry.retired = True
                self._retired.add(entry)

    def _over_capacity(self) -> list[Handle]:
        """Idle entries to close, least recently used first, so that the LRU fits (lock held). Stores in
        use stay: past capacity only while more stores than that are in use at once."""
        victims: list[Handle] = []
        excess = len(self._lru) - self.capacity
        for entry in list(self._lru.values()):
            if excess <= 0:
                break
            if entry.idle:
                del self._lru[entry.key]
                entry.closed = True
                victims.append(entry)
                excess -= 1
        self.evictions += len(victims)
        return victims

    def shrink(self, count: int) -> int:
        """Close up to ``count`` idle stores, least recently used first; returns how many."""
        with self._lock:
            victims: list[Handle] = []
            for entry in list(self._lru.values()):
                if len(victims) >= count:
                    break
                if entry.idle:
                    del self._lru[entry.key]
                    entry.closed = True
                    victims.append(entry)
            self.evictions += len(victims)
        self._close_all(victims)
        return len(victims)

    def make_room(self) -> int:
        """Close idle stores while free descriptors are under the low-water mark; returns how many.

        Counting them lists ``/proc/self/fd`` (a few hundred entries in a busy server), so it is done
        again only once the cold opens since the last count could have used half the headroom it saw;
        an open that finds none left anyway is managed in :meth:`_open`."""
        with self._lock:
            self._opens_unchecked -= 1
            if self._opens_unchecked > 0:
                return 0
        mark = low_water(self.limit)
        free = free_descriptors()
        if free is not None and free < mark:
            sweeper.drain()  # evicted stores still waiting to be closed give theirs back first
            free = free_descriptors()
        closed = 0
        while free is not None and free < mark:
            shrunk = self.shrink(max(1, (mark - free) // 3 + 1))
            if shrunk == 0:
                break
            closed += shrunk
            free = free_descriptors()
        with self._lock:
            headroom = 0 if free is None else free - mark
            self._opens_unchecked = headroom // (2 * DESCRIPTORS_PER_STORE)
        return closed

    def sweep(self) -> int:
        """Close the stores unused for ``idle_seconds``; returns how many."""
        cutoff = self._clock() - self.idle_seconds
        with self._lock:
            victims = [e for e in self._lru.values() if e.idle and e.last_used <= cutoff]
            for entry in victims:
                del self._lru[entry.key]
                entry.closed = True
            self.idle_closes += len(victims)
        self._close_all(victims)
        return len(victims)

    def forget(self, key: str) -> None:
        """Close the store's handle now if idle, else when its last user returns it (a store being
        deleted; an operator's or a test's eviction). A checkout meanwhile gets a fresh handle."""
        with self._lock:
            self._opened.pop(key, None)
            entry = self._lru.pop(key, None)
            if entry is None:
                return
            if not entry.idle:
                entry.retired = True
                if not entry.pinned:
                    self._retired.add(entry)
                    return
            entry.closed = True
        entry.close()

    @staticmethod
    def drain() -> None:
        """Close at once the stores eviction handed to the sweeper's thread (tests, a home closing)."""
        sweeper.drain()

    def close_all(self) -> None:
        """Close every idle store (the home is closing); those in use close on return."""
        with self._lock:
            entries = list(self._lru.values())
            self._lru.clear()
            victims = []
            for entry in entries:
                if entry.users == 0:  # pinned ones too: the home is closing under its holders
                    entry.closed = True
                    victims.append(entry)
                else:
                    entry.retired = True
                    self._retired.add(entry)
        self._close_all(victims)
        sweeper.drain()  # and those evicted a moment ago, still waiting for the sweeper

    @staticmethod
    def _close_all(entries: list[Handle]) -> None:
        for entry in entries:
            entry.close()

    # -- looking ------------------------------------------------------------------------------------

    def opened_before(self, key: str) -> bool:
        """Whether this cache has opened the store (lately: it forgets the oldest of
        :data:`OPENED_KEPT`), so that opening it again only reads."""
        return key in self._opened or key in self._lru

    def is_open(self, key: str) -> bool:
        return key in self._lru

    def stats(self) -> OpenStoreStats:
        with self._lock:
            entries = [*self._lru.values(), *self._retired]
            in_use = sum(1 for e in entries if e.users > 0)
            pinned = sum(1 for e in entries if e.pinned)
            evictions, idle = self.evictions, self.idle_closes
        return OpenStoreStats(
            open_stores=len(entries),
            in_use=in_use,
            pinned=pinned,
            capacity=self.capacity,
            evictions=evictions,
            idle_closes=idle,
            descriptor_limit=descriptor_limit(),
            free_descriptors=free_descriptors(),
        )


__all__ = [
    "OpenStoreStats",
    "OpenStores",
    "capacity_for",
    "leases",
]
