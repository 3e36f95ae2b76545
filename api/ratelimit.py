"""A per-key token bucket. Answers how long to wait; the caller turns that into a 429."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

_MAX_BUCKETS = 10_000


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class TokenBucketLimiter:
    """``rate`` tokens a second refill a bucket of ``burst`` tokens, one bucket per key.

    Thread-safe: FastAPI runs sync dependencies in a thread pool. A rate of 0 disables limiting.
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def acquire(self, key: str) -> float:
        """Take one token for ``key``: 0.0 if granted, else the seconds until one is available."""
        if not self.enabled:
            return 0.0
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= _MAX_BUCKETS:
                    self._forget_full(now)
                bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        """Drop buckets that have refilled: forgetting them changes nothing."""
        refill = self.burst / self.rate
        for key in [k for k, b in self._buckets.items() if now - b.stamp >= refill]:
            del self._buckets[key]
