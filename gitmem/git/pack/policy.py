"""When a store is packed: after its writes, and once it goes quiet.

A write leaves new objects behind (loose files, or the small pack a batch of writes makes). Each commit
writes a new tree for the folder it touches, as large as that folder: in a folder of 10,000 notes a
loose tree is ~250 KB, so counting writes says little about disk. The policy, per store:

* **While written:** after a write, :func:`after_write` looks at the bytes written since the last
  pack run (loose objects, or the small packs a batched writer leaves), the loose objects' count and
  the number of packs, but only every few writes (it predicts from the bytes per write when the limit
  will be near). Past :data:`UNPACKED_BYTES_LIMIT`, :data:`LOOSE_OBJECTS_LIMIT` or :data:`MAX_PACKS`
  it starts a background ``geometric`` pack: loose objects and small packs rolled up into one so
  pack sizes grow geometrically (few packs, and little rewritten each time; :mod:`gitmem.git.pack.roll_up`).
* **When quiet:** once ``main`` has not moved for :data:`QUIET_SECONDS` and enough was written since
  the last one, a ``full`` pack puts everything into one pack and searches deltas again, so
  successive versions of a big tree, each stored whole at the head of its small pack, become deltas of
  each other (a tree that differs by one entry is a delta of a few dozen bytes).

The packs themselves are the packer's (:mod:`gitmem.git.pack.packing`), called through its module so
that a test can run them at once.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gitmem.git.pack import packing
from gitmem.recent import Recent

log = logging.getLogger(__name__)

# Objects written since the last pack run (loose, or in batch packs). Each batch pack holds whole copies
# of the trees it changed, so a write into a 10,000-note folder adds ~250 KB: rolled up every megabyte,
# such a store ran a background repack every fourth write and its writes took twice as long
# (python -m bench.flat: 2.3x the 100-note folder's p50 at 1 MB, 1.3-1.5x at 4 MB).
UNPACKED_BYTES_LIMIT = 4 << 20
LOOSE_OBJECTS_LIMIT = 256
MAX_PACKS = 12  # geometric packs stay few (log2 of the store's size); many small ones mean batched writes
NEW_PACKS_BEFORE_ROLL_UP = 4
MAX_WRITES_BETWEEN_LOOKS = 32
WRITES_WHILE_PACKING = 4
QUIET_SECONDS = 2.0


class _StorePolicy:
    """One store's packing state in this process (a store is opened once per thread: this is shared)."""

    def __init__(self, repo_path: Path) -> None:
        self.repo_path = repo_path
        self.lock = threading.Lock()
        self.writes_until_look = 1
        self.writes_since_pack = 0
        self.packs_when_asked = 0  # packs when a pack was last asked for because there were many

    def after_write(self, max_writes: int) -> bool:
        """Count a write; True if a look at the disk is due now."""
        self.writes_since_pack += 1
        self.writes_until_look -= 1
        return self.writes_until_look <= 0 or self.writes_since_pack >= max_writes

    def due(self, max_writes: int) -> bool:
        """Whether to pack now; if not, when to look again (predicted from the bytes per write so far)."""
        seen = packing.on_disk(self.repo_path)
        loose, written, packs = seen.loose, packing.written_since_pack(self.repo_path, seen), seen.packs
        if packs <= MAX_PACKS:
            self.packs_when_asked = 0
        # Geometric packs may legitimately stay above MAX_PACKS: then roll up only once more came.
        many_packs = packs > max(MAX_PACKS, self.packs_when_asked + NEW_PACKS_BEFORE_ROLL_UP)
        if (
            self.writes_since_pack >= max_writes
            or written >= UNPACKED_BYTES_LIMIT
            or loose.count >= LOOSE_OBJECTS_LIMIT
            or many_packs
        ):
            if many_packs:
                self.packs_when_asked = packs
            self.writes_since_pack = 0
            self.writes_until_look = WRITES_WHILE_PACKING  # a packer takes a while: no look each write
            return True
        writes = max(1, self.writes_since_pack)
        room = min(
            (UNPACKED_BYTES_LIMIT - written) / max(written / writes, 1.0),
            (LOOSE_OBJECTS_LIMIT - loose.count) / max(loose.count / writes, 1.0),
        )
        self.writes_until_look = int(max(1, min(MAX_WRITES_BETWEEN_LOOKS, room / 2)))
        return False


class _QuietWatcher:
    """One thread a process: consolidates a store once it has been quiet for :data:`QUIET_SECONDS`,
    then runs what the writer asked to run then (the index checkpoints its write-ahead log)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.last_write: dict[str, float] = {}  # store path -> monotonic time of our last write to it
        # (a time, a store path) for each store waited for, the earliest first; a store written again
        # since keeps its old time here until it comes up, then goes back with its new one (a scan of
        # last_write for the earliest took 0.34 ms a store at 10,000 waiting, a third of a consolidation).
        self._due: list[tuple[float, str]] = []
        self.when_quiet: dict[str, Callable[[], None]] = {}
        self.fsync: dict[str, bool] = {}  # store path -> whether its packs are flushed
        self.thread: threading.Thread | None = None

    def wrote(self, repo_path: Path, when_quiet: Callable[[], None] | None = None, fsync: bool = True) -> None:
        with self.lock:
            key = str(repo_path)
            waited_for = self._wait_for(key, time.monotonic())
            self.fsync[key] = fsync
            if when_quiet is not None:
                self.when_quiet[key] = when_quiet
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="gitmem quiet packer", daemon=True)
                self.thread.start()
            # A later time for a store already waited for never makes the wait shorter (the thread
            # looks again when the old time comes): waking it on every write only costs CPU.
            if not waited_for:
                self.lock.notify()

    def _wait_for(self, key: str, when: float) -> bool:
        """Note a write to ``key`` at ``when`` (lock held); whether it was waited for already."""
        waited_for = key in self.last_write
        self.last_write[key] = when
        if not waited_for:
            heapq.heappush(self._due, (when, key))
        return waited_for

    def _next_quiet(self) -> Path:
        """Wait until some store we wrote to has been quiet for long enough."""
        with self.lock:
            while True:
                if not self._due:
                    self.lock.wait()
                    continue
                queued, key = self._due[0]
                when = self.last_write[key]
                if when > queued:  # written again since: back in line at its last write
                    heapq.heapreplace(self._due, (when, key))
                    continue
                wait = when + QUIET_SECONDS - time.monotonic()
                if wait <= 0:
                    heapq.heappop(self._due)
                    del self.last_write[key]
                    return Path(key)
                self.lock.wait(wait)

    def _run(self) -> None:
        while True:
            repo_path = self._next_quiet()
            with self.lock:
                fsync = self.fsync.pop(str(repo_path), True)
            try:
                ref_age = time.time() - (repo_path / "refs" / "heads" / "main").stat().st_mtime
                if ref_age < QUIET_SECONDS:  # another process writes it: look again later
                    with self.lock:
                        if str(repo_path) not in self.last_write:
                            self._wait_for(str(repo_path), time.monotonic() - ref_age)
                        self.fsync.setdefault(str(repo_path), fsync)
                    continue
                self._call_when_quiet(repo_path)  # first: a full pack of a big store takes a while
                packing.wait_for_background_packer(repo_path)
                if packing.worth_consolidating(repo_path):
                    packing.pack_in_background(repo_path, "full", fsync=fsync, always=True)
                    packing.wait_for_background_packer(repo_path)
            except OSError:  # the store went away, or no process could be started: try after the next write
                log.debug("could not consolidate %s", repo_path.name, exc_info=True)

    def _call_when_quiet(self, repo_path: Path) -> None:
        with self.lock:
            quiet = self.when_quiet.pop(str(repo_path), None)
        if quiet is not None:
            try:
                quiet()
            except Exception:  # housekeeping: the next quiet spell tries again
                log.debug("after %s went quiet", repo_path.name, exc_info=True)


# The stores written most recently only: 10,000 stores written kept 10,000 (issue 27). A store whose
# policy was dropped looks at its disk on its next write, as after a restart.
POLICIES_KEPT = 1024
_policies: Recent[str, _StorePolicy] = Recent(POLICIES_KEPT)
_watcher = _QuietWatcher()


def after_write(
    repo_path: Path, *, max_writes: int, when_quiet: Callable[[], None] | None = None, fsync: bool = True
) -> None:
    """Called after each successful write to a store: packs in the background when it is due (and at
    least every ``max_writes`` writes of this process), consolidates when the store goes quiet and
    then calls ``when_quiet``. ``fsync``: the store's packs are flushed (its home's durability)."""
    policy = _policies.get_or_put(str(repo_path), lambda: _StorePolicy(repo_path))
    # The look at the disk (a walk of the objects) holds this store's lock only: other stores' writers
    # never wait for it.
    with policy.lock:
        look = policy.after_write(max_writes)
        due = look and policy.due(max_writes)
    if due:
        packing.pack_in_background(repo_path, fsync=fsync)
    _watcher.wrote(repo_path, when_quiet, fsync)
