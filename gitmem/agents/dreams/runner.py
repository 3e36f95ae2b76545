"""The background runner of dreams in each server process."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from gitmem.agents.dreams.dreamers import (
    Dreamer,
)

if TYPE_CHECKING:
    from gitmem.engine.gitmem import Gitmem
from gitmem.agents.dreams.dreams import dreams_for, runner_id

log = logging.getLogger(__name__)


class DreamRunner:
    """Runs pending dreams in a background thread of this process, one at a time. Several runners
    (processes) share the work safely: each dream is claimed under a transaction."""

    def __init__(
        self,
        gm: Gitmem,
        dreamer: Dreamer | None = None,
        *,
        poll_interval: float = 1.0,
        timeout_seconds: float | None = None,
    ) -> None:
        self.gm = gm
        self.dreams = dreams_for(gm)
        self.dreamer = dreamer
        self.poll_interval = poll_interval
        self.timeout_seconds = timeout_seconds
        self.runner_id = runner_id()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running: str | None = None  # the dream this runner's thread is running

    def start(self) -> DreamRunner:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gitmem-dreams", daemon=True)
            self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def signal_stop(self) -> None:
        """Ask the thread to stop after the dream it is running; :meth:`stop` waits for it."""
        self._stop.set()
        self._wake.set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop after the dream in progress, waiting at most ``timeout`` seconds; a dream still running
        then is failed at once (:meth:`~gitmem.agents.dreams.ledger.DreamRuns.abandon`), not left for
        its time limit to find."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            running = self._running
            if self._thread.is_alive() and running is not None:
                log.warning("dream %s was still running as this process stopped; it is failed", running)
                self.dreams.abandon(running)

    def run_pending(self) -> int:
        """Run every pending dream now (in this thread); how many ran."""
        self.dreams.reap()
        self.dreams.expire(self.timeout_seconds)
        count = 0
        while not self._stop.is_set():
            dream_id = self.dreams.claim_next(self.runner_id)
            if dream_id is None:
                return count
            self._running = dream_id
            try:
                with self.gm.leases():  # the dream's stores go back to the bounded cache after it
                    self.dreams.run(dream_id, self.dreamer, timeout_seconds=self.timeout_seconds)
            finally:
                self._running = None
            count += 1
        return count

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_pending()
            except Exception:
                log.exception("the dream runner failed a round")
            self._wake.wait(self.poll_interval)
            self._wake.clear()
