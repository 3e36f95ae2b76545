"""Quiet-period scheduling of changed paths, for the mount (:mod:`gitmem.sync.mount`).

A path touched now is *due* once it has been quiet for ``quiet`` seconds; a path touched without pause is
still due every ``max_wait`` seconds (so a file written continuously is synced anyway). Paths are note
paths, or folder prefixes ending in ``/`` (a whole folder changed). The debouncer also remembers watchdog
moves (destination -> source), which the syncer uses to recognise renames.

Thread-safe: the watcher thread touches, the mount's worker waits and takes. Its lock is never held over
I/O.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable


class Debouncer:
    def __init__(self, quiet: float, max_wait: float | None = None) -> None:
        self.quiet = quiet
        self.max_wait = max(5.0, 10 * quiet) if max_wait is None else max_wait
        self._cv = threading.Condition()
        self._due: dict[str, float] = {}  # path -> when it is due (monotonic)
        self._since: dict[str, float] = {}  # when a pending path was first touched: bounds the debounce
        self._moves: dict[str, str] = {}  # dest note path -> src note path

    def __len__(self) -> int:
        with self._cv:
            return len(self._due)

    def paths(self) -> set[str]:
        """The pending paths (a copy)."""
        with self._cv:
            return set(self._due)

    def touch(self, paths: Iterable[str], delay: float | None = None) -> None:
        """These paths changed: due after ``delay`` (default: the quiet period) unless touched again."""
        paths = list(paths)
        if not paths:
            return
        now = time.monotonic()
        due = now + (self.quiet if delay is None else delay)
        with self._cv:
            for p in paths:
                self._due[p] = min(due, self._since.setdefault(p, now) + self.max_wait)
            self._cv.notify_all()

    def take(self, paths: Iterable[str]) -> list[str]:
        """Remove paths from the pending set (whether due or not) and return them."""
        with self._cv:
            return self._take(list(paths))

    def take_all(self) -> list[str]:
        with self._cv:
            return self._take(list(self._due))

    def wait_due(self, until: float, stopping: threading.Event) -> list[str]:
        """Wait until a path is due, ``until`` (monotonic) passes or :meth:`wake`; take the due paths."""
        with self._cv:
            now = time.monotonic()
            wake = min([until, *self._due.values()])
            if wake > now:
                self._cv.wait(wake - now)
            if stopping.is_set():
                return []
            now = time.monotonic()
            return self._take([p for p, t in self._due.items() if t <= now])

    def wake(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def record_move(self, dest: str, src: str) -> None:
        with self._cv:
            self._moves[dest] = src

    def pop_moves(self, dests: Iterable[str]) -> dict[str, str]:
        """The recorded moves to these destinations (forgotten once read)."""
        with self._cv:
            return {d: self._moves.pop(d) for d in dests if d in self._moves}

    def _take(self, paths: list[str]) -> list[str]:
        for p in paths:
            self._due.pop(p, None)
            self._since.pop(p, None)
        return paths
