"""The server's retention schedule: :func:`gitmem.engine.rewrite.retention.prune_all` every interval,
in a daemon thread of each server process, one round an interval across them all."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gitmem.db.jobs import claim_round, holding
from gitmem.engine.rewrite.retention import PruneReport, prune_all

if TYPE_CHECKING:
    from gitmem.engine.gitmem import Gitmem

log = logging.getLogger(__name__)


class PruneScheduler:
    """Runs :func:`prune_all` every ``interval`` seconds in a daemon thread.

    Every server process (every node) may start one: a round is claimed first (:mod:`gitmem.db.jobs`),
    so one runs an interval across them all and never two at once. ``stop()`` waits for the round in
    progress to finish.
    """

    def __init__(
        self,
        gm: Gitmem,
        interval: float = 3600.0,
        *,
        first_delay: float | None = None,
        on_reports: Callable[[list[PruneReport]], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.gm = gm
        self.interval = interval
        self.first_delay = interval if first_delay is None else first_delay
        self.on_reports = on_reports
        self.rounds = 0
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PruneScheduler:
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gitmem-pruner", daemon=True)
        self._thread.start()
        return self

    def signal_stop(self) -> None:
        """Ask the thread to stop after the store it is pruning (the round ends there); :meth:`stop` waits."""
        self._stop.set()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def run_once(self) -> list[PruneReport] | None:
        """One round, unless another process or node is pruning right now or did within the interval
        (then None)."""
        db = self.gm.database
        with holding(db, "prune") as held:
            if not held or not claim_round(db, "prune", self.interval, self.owner):
                return None
            reports = prune_all(self.gm, stop=self._stop)
        self.rounds += 1
        if self.on_reports is not None:
            self.on_reports(reports)
        return reports

    def _run(self) -> None:
        delay = self.first_delay
        while not self._stop.wait(delay):
            try:
                self.run_once()
            except Exception:  # keep the schedule; the next round may do better
                log.exception("a pruning round failed")
            delay = self.interval
