"""Token buckets: one per key for every request (:class:`TokenBucketLimiter`), and one per client
address for wrong secrets (:class:`WrongSecrets`). They answer how long to wait; the caller turns
that into a 429 with ``Retry-After``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import Scope

from gitmem import metrics
from gitmem.errors import RateLimited

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
            bucket.tokens, bucket.stamp = self._refilled(bucket, now), now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return self._until_one(bucket.tokens)

    def waiting(self, key: str) -> float:
        """The seconds until ``key`` has a token again (0.0: it has one now), taking none."""
        if not self.enabled:
            return 0.0
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                return 0.0
            tokens = self._refilled(bucket, now)
        return 0.0 if tokens >= 1.0 else self._until_one(tokens)

    def _refilled(self, bucket: _Bucket, now: float) -> float:
        """The bucket's tokens at ``now``: what it held, and what the rate has added since, to the burst."""
        return min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.rate)

    def _until_one(self, tokens: float) -> float:
        """The seconds until a bucket holding ``tokens`` (fewer than one) holds one."""
        return (1.0 - tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        """Drop buckets that have refilled: forgetting them changes nothing."""
        refill = self.burst / self.rate
        for key in [k for k, b in self._buckets.items() if now - b.stamp >= refill]:
            del self._buckets[key]


def client_address(scope: Scope) -> str:
    """The address the connection came from (behind a proxy, the one uvicorn's ``--proxy-headers``
    and ``--forwarded-allow-ips`` give)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class WrongSecrets:
    """Wrong keys and tokens from one client address, on every surface that takes one (the API, MCP,
    Git over HTTP, the web view's sign-in): ``burst`` may fail at once, then one every ``1/rate``
    seconds. An address past that is refused (429, ``Retry-After``) before its secret is even looked
    at, so a flood guesses nothing more, while a right key from any other address goes on as before.
    A missing secret is not a wrong one (Git asks without one first)."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._buckets = TokenBucketLimiter(rate, burst, clock)

    def check(self, address: str) -> None:
        """Refuse ``address`` while it has no wrong secret left to spend."""
        wait = self._buckets.waiting(address)
        if wait > 0:
            metrics.RATE_LIMITED.inc()
            raise RateLimited("too many wrong keys from this address; retry later", retry_after=wait)

    def failed(self, address: str) -> None:
        """``address`` sent a wrong secret."""
        self._buckets.acquire(address)
