"""Client threads that start together, timed from the moment all are ready until the last is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def run_together(count: int, body: Callable[[int, Callable[[], object]], None]) -> float:
    """Run ``body(t, ready)`` in ``count`` threads; each calls ``ready()`` once set up (a connection
    open) and waits there for the others. Returns the seconds from then until the last thread ends."""
    start = threading.Barrier(count + 1)
    threads = [threading.Thread(target=body, args=(t, start.wait)) for t in range(count)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began
