"""A graceful stop: what a server process does between SIGTERM and its exit (docs/deploy.md, "Stopping").

1. At SIGTERM the process starts draining: ``/readyz`` answers 503, and every new request but the
   probes (``/healthz``, ``/readyz``, ``/metrics``) is answered 503 ``api_error`` with ``Retry-After``,
   ``x-should-retry: true`` and ``Connection: close``, before anything reads it: a drained request is
   never applied, so the client (the SDK retries by itself) may send it again, to another node.
2. ``drain_seconds`` later (at once by default; a load balancer that polls ``/readyz`` needs a few
   seconds to notice) uvicorn's own shutdown runs: it stops accepting connections and waits for the
   requests in flight, at most ``GITMEM_STOP_TIMEOUT`` seconds. A write in flight is answered when its
   commit is durable, as always; a write that had not reached its batch when the wait ran out is
   never applied, since a commit is durable before ``main`` moves (the engine's promise of a crash).
3. Then the app's lifespan ends: the webhook lease is released (another process takes over delivery at
   once rather than after the lease lapses), a dream still running is failed at once (not left for its time limit), the
   retention schedule stops, each within what remains of the stop's bound.

A second SIGTERM, or SIGINT (Ctrl-C), skips the wait of step 2. uvicorn installs its signal handlers
before the app starts; :meth:`Drain.install` wraps them from the app's lifespan, in the main thread,
so the same code serves ``gitmem serve`` and ``uvicorn --factory`` alike, with one worker or many
(each worker gets the signal from uvicorn's supervisor and drains itself).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from gitmem import metrics

log = logging.getLogger("gitmem.api")

RETRY_AFTER_SECONDS = 1
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_Handler = Callable[[int, FrameType | None], Any]


class Drain:
    """Whether this process is stopping, and since when (monotonic seconds)."""

    def __init__(self) -> None:
        self.since: float | None = None
        self._lock = threading.Lock()

    @property
    def draining(self) -> bool:
        return self.since is not None

    def begin(self) -> bool:
        """Start draining; ``False`` if it had started already."""
        with self._lock:
            if self.since is not None:
                return False
            self.since = time.monotonic()
        metrics.DRAINING.set(1)
        log.info("draining: new requests are answered 503 until this process stops")
        return True

    def install(self, drain_seconds: float) -> None:
        """Wrap the server's SIGTERM and SIGINT handlers so that they drain first (see the module's
        docstring). Does nothing outside the main thread (an in-process test client) or when no
        server handles the signals (nothing to wrap)."""
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if callable(previous):
                signal.signal(sig, self._handler(previous, drain_seconds if sig == signal.SIGTERM else 0.0, loop))

    def _handler(self, previous: _Handler, wait: float, loop: asyncio.AbstractEventLoop) -> _Handler:
        def handle(sig: int, frame: FrameType | None) -> None:
            first = self.begin()
            if first and wait > 0:
                # The server's own handler (uvicorn: stop accepting, finish what is in flight) runs
                # once the wait is over; the event loop is the signal's thread, so schedule it there.
                loop.call_soon_threadsafe(loop.call_later, wait, previous, sig, None)
            else:
                previous(sig, frame)

        return handle
