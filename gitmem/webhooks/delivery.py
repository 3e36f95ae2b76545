"""Delivering the outbox: signed POSTs, retried with exponential backoff, in order per store.

Each pending ``webhook_deliveries`` row is one event for one subscription. A store's events reach a
subscription in outbox order: only the oldest undelivered event of each (subscription, store) is tried,
so a failing receiver holds that store's later events back until the earlier one is delivered or given
up (after ``give_up_after_seconds``, a day or more by default: a receiver down for an hour loses
nothing). Retries wait ``first_retry_seconds`` doubling up to ``max_retry_seconds``.

One worker across all server processes: a lease row in the catalog, taken and renewed under
``BEGIN IMMEDIATE``; a process whose lease lapses (it died) is replaced after ``lease_seconds``.
Scheduling uses the home's clock (tests move it); the lease and signatures use the wall clock.

Subscriptions are delivered to side by side (``concurrency`` at once), each attempt within one total
deadline (``timeout_seconds``) and reading a few KB of the answer at most, only to the addresses
:mod:`gitmem.webhooks.targets` admits (:mod:`gitmem.webhooks.sender`). Any failure of an attempt, of
whatever kind, is recorded on that delivery and backed off; a URL that can never work (kept from
before URLs were checked) is given up at once.

Signatures are Standard Webhooks: ``webhook-id`` (the event id, the same on every retry),
``webhook-timestamp`` (seconds) and ``webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">``
keyed by the base64-decoded part of the ``whsec_`` secret, which the ``anthropic`` SDK's
``client.beta.webhooks.unwrap`` verifies.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from gitmem import metrics
from gitmem.clock import from_micros, to_micros
from gitmem.db import database_unreachable
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import InvalidRequest
from gitmem.webhooks.outbox import SECRET_PREFIX, webhooks_for
from gitmem.webhooks.sender import Sender
from gitmem.webhooks.targets import Networks, RefusedAddress

log = logging.getLogger(__name__)

LEASE_NAME = "delivery"
KEEP_DONE_SECONDS = 7 * 86400  # delivered or abandoned events stay this long, then are pruned


@dataclass(frozen=True)
class DeliveryPolicy:
    first_retry_seconds: float = 5.0
    max_retry_seconds: float = 3600.0
    give_up_after_seconds: float = 3 * 86400.0
    timeout_seconds: float = 10.0  # an attempt's whole deadline: resolve, connect, send, answer
    lease_seconds: float = 30.0
    catch_up_seconds: float = 60.0
    batch: int = 100
    concurrency: int = 8  # subscriptions delivered to at once
    allow_networks: Networks = ()  # GITMEM_WEBHOOK_ALLOW_NETWORKS: reachable whatever the address rules say

    def retry_delay(self, attempts: int) -> float:
        """The wait after the ``attempts``-th failed attempt (1, 2, ...)."""
        return min(self.first_retry_seconds * 2.0 ** min(attempts - 1, 40), self.max_retry_seconds)


@dataclass(frozen=True)
class Backlog:
    """What waits in the outbox: deliveries neither made nor given up, and the oldest one's event time."""

    depth: int
    oldest_micros: int | None


def backlog(gm: Gitmem) -> Backlog:
    """The outbox's backlog across the home (every workspace, every node): one indexed count."""
    webhooks_for(gm)  # its tables made, on a home that never had a webhook
    row = gm.catalog.db.execute(
        "SELECT count(*), min(o.created_at) FROM webhook_deliveries d JOIN webhook_outbox o ON o.seq = d.seq"
        " WHERE d.delivered_at IS NULL AND d.given_up_at IS NULL"
    ).fetchone()
    return Backlog(int(row[0]), int(row[1]) if row[1] is not None else None)


def sign(secret: str, message_id: str, timestamp: int, body: str) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    digest = hmac.new(key, f"{message_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def envelope(event_id: str, created_at_micros: int, data: str) -> str:
    """The body: the SDK's ``BetaWebhookEvent`` (``{"id", "created_at", "type": "event", "data"}``)."""
    created = from_micros(created_at_micros).isoformat().replace("+00:00", "Z")
    return json.dumps(
        {"id": event_id, "created_at": created, "type": "event", "data": json.loads(data)},
        separators=(",", ":"),
        ensure_ascii=False,
    )


_PENDING_HEAD = """
d.delivered_at IS NULL AND d.given_up_at IS NULL
  AND d.seq = (SELECT min(seq) FROM webhook_deliveries q WHERE q.webhook_id = d.webhook_id
               AND q.store_key = d.store_key AND q.delivered_at IS NULL AND q.given_up_at IS NULL)
  AND d.next_attempt_at <= ?
"""
_DUE_SUBSCRIPTIONS = f"""
SELECT w.id FROM webhooks w
WHERE EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = w.id AND {_PENDING_HEAD})
"""  # noqa: S608  built from constants; values bound
_DUE = f"""
SELECT d.webhook_id, d.seq, d.attempts, d.first_attempt_at, d.next_attempt_at, o.event_id, o.data,
       o.created_at, w.url, w.secret
FROM webhook_deliveries d JOIN webhook_outbox o ON o.seq = d.seq JOIN webhooks w ON w.id = d.webhook_id
WHERE d.webhook_id = ? AND {_PENDING_HEAD}
ORDER BY d.seq LIMIT ?
"""  # noqa: S608  built from constants; values bound


class Dispatcher:
    """Delivers due events when this process holds the lease. :meth:`run_once` for a round (tests),
    :meth:`start` for a background thread (the server).

    Each subscription with something due gets a turn in a pool of ``policy.concurrency`` threads: its
    due events in order, until none is left or one fails (a failure ends its turn, so a receiver that
    holds every attempt to its deadline costs one deadline a poll). Turns of different subscriptions run
    side by side, and the background loop starts new turns at every poll without waiting for the
    ones still running: a slow receiver delays only its own events."""

    def __init__(
        self,
        gm: Gitmem,
        policy: DeliveryPolicy | None = None,
        *,
        sender: Sender | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.gm = gm
        self.policy = policy or DeliveryPolicy()
        self.webhooks = webhooks_for(gm)
        self.owner = f"{os.getpid()}:{id(self):x}"
        self.wall_clock = wall_clock
        self._sender = sender or Sender(self.policy.allow_networks, max_connections=4 * self.policy.concurrency)
        self._turns = ThreadPoolExecutor(max_workers=self.policy.concurrency, thread_name_prefix="gitmem-webhook")
        self._busy: set[str] = set()  # subscriptions whose turn is running
        self._running: set[Future[int]] = set()
        self._lock = threading.RLock()  # a turn done at once runs its callback under it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_catch_up = float("-inf")

    # -- the lease --------------------------------------------------------------------------------

    def claim(self) -> bool:
        """Take or renew the delivery lease; ``False`` if another live process holds it."""
        now = self.wall_clock()
        if self._held_by_another(self.gm.catalog.db, now):  # a plain read first: no write lock for the others
            return False
        with self.gm.catalog.transaction() as db:
            if self._held_by_another(db, now):
                return False
            db.execute(
                "INSERT INTO webhook_lease VALUES (?,?,?) ON CONFLICT (name) DO UPDATE"
                " SET owner=excluded.owner, expires_at=excluded.expires_at",
                (LEASE_NAME, self.owner, int((now + self.policy.lease_seconds) * 1e6)),
            )
        return True

    def _held_by_another(self, db: Any, now: float) -> bool:
        row = db.execute("SELECT owner, expires_at FROM webhook_lease WHERE name=?", (LEASE_NAME,)).fetchone()
        return row is not None and row["owner"] != self.owner and row["expires_at"] > now * 1e6

    def release(self) -> None:
        with self.gm.catalog.transaction() as db:
            db.execute("DELETE FROM webhook_lease WHERE name=? AND owner=?", (LEASE_NAME, self.owner))

    # -- a round ----------------------------------------------------------------------------------

    def run_once(self) -> int:
        """Deliver everything due (each store's next event after the one delivered), waiting for every
        turn; the number delivered."""
        return sum(turn.result() for turn in self._start_turns())

    def _start_turns(self) -> list[Future[int]]:
        """A turn for every subscription with something due whose last turn is over."""
        if self.gm.catalog.db.execute("SELECT 1 FROM webhooks LIMIT 1").fetchone() is None:
            return []  # nobody subscribed: no lease to take, nothing to write
        if not self.claim():
            return []
        if self.wall_clock() - self._last_catch_up >= self.policy.catch_up_seconds:
            self._last_catch_up = self.wall_clock()
            self.webhooks.catch_up()
            self._prune()
        due = [row[0] for row in self.gm.catalog.db.execute(_DUE_SUBSCRIPTIONS, (to_micros(self.gm.clock()),))]
        started = []
        with self._lock:
            for webhook_id in due:
                if webhook_id in self._busy or self._stop.is_set():
                    continue
                self._busy.add(webhook_id)
                turn = self._turns.submit(self._turn, webhook_id)
                self._running.add(turn)
                turn.add_done_callback(self._ended)
                started.append(turn)
        return started

    def _ended(self, turn: Future[int]) -> None:
        with self._lock:
            self._running.discard(turn)

    def _turn(self, webhook_id: str) -> int:
        """One subscription's due events in order, until none is due or one fails; the number delivered."""
        delivered = 0
        try:
            while not self._stop.is_set():
                now = to_micros(self.gm.clock())
                due = self.gm.catalog.db.execute(_DUE, (webhook_id, now, self.policy.batch)).fetchall()
                if not due:
                    break
                for row in due:
                    if self._stop.is_set() or not self._attempt(row):
                        return delivered
                    delivered += 1
        except Exception:  # the catalog, not the receiver: the next poll tries again
            log.exception("webhook %s: a delivery turn failed", webhook_id)
        finally:
            with self._lock:
                self._busy.discard(webhook_id)
        return delivered

    def _attempt(self, row: Any) -> bool:
        body = envelope(row["event_id"], row["created_at"], row["data"])
        timestamp = int(self.wall_clock())
        headers = {
            "content-type": "application/json",
            "webhook-id": row["event_id"],
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(row["secret"], row["event_id"], timestamp, body),
        }
        error: str | None = None
        permanent = False
        try:
            status = self._sender.post(row["url"], body.encode(), headers, self.policy.timeout_seconds)
            if not 200 <= status < 300:
                error = f"HTTP {status}"
        except InvalidRequest as exc:  # the URL itself (kept from before it was checked): no retry helps
            error, permanent = f"invalid url: {exc.message}", True
        except RefusedAddress as exc:  # may change: the name's records, the allow-list
            error = str(exc)
        except Exception as exc:  # whatever else fails is this subscription's failure alone
            error = f"{type(exc).__name__}: {exc}"[:300]
        self._record(row, error, give_up_now=permanent)
        return error is None

    def _record(self, row: Any, error: str | None, *, give_up_now: bool = False) -> None:
        now = to_micros(self.gm.clock())
        attempts = row["attempts"] + 1
        first = row["first_attempt_at"] or now
        key = (row["webhook_id"], row["seq"])
        if error is None:
            metrics.WEBHOOK_DELIVERIES.labels("delivered").inc()
        with self.gm.catalog.transaction() as db:
            if error is None:
                db.execute(
                    "UPDATE webhook_deliveries SET delivered_at=?, attempts=?, first_attempt_at=?,"
                    " last_error=NULL WHERE webhook_id=? AND seq=?",
                    (now, attempts, first, *key),
                )
                return
            give_up = give_up_now or (now - first) / 1e6 >= self.policy.give_up_after_seconds
            next_at = now + int(self.policy.retry_delay(attempts) * 1e6)
            db.execute(
                "UPDATE webhook_deliveries SET attempts=?, first_attempt_at=?, next_attempt_at=?,"
                " last_error=?, given_up_at=? WHERE webhook_id=? AND seq=?",
                (attempts, first, next_at, error, now if give_up else None, *key),
            )
        metrics.WEBHOOK_DELIVERIES.labels("given_up" if give_up else "failed").inc()
        log.info(
            "webhook %s: event %s failed (%s), attempt %d%s",
            row["webhook_id"],
            row["event_id"],
            error,
            attempts,
            "; given up" if give_up else "",
        )

    def _prune(self) -> None:
        cutoff = to_micros(self.gm.clock()) - int(KEEP_DONE_SECONDS * 1e6)
        with self.gm.catalog.transaction() as db:
            db.execute("DELETE FROM webhook_deliveries WHERE coalesce(delivered_at, given_up_at) < ?", (cutoff,))
            db.execute(
                "DELETE FROM webhook_outbox WHERE created_at < ? AND seq NOT IN (SELECT seq FROM webhook_deliveries)",
                (cutoff,),
            )

    # -- the background thread --------------------------------------------------------------------

    def start(self, poll_seconds: float = 1.0) -> Dispatcher:
        self._thread = threading.Thread(target=self._loop, args=(poll_seconds,), name="gitmem-webhooks", daemon=True)
        self._thread.start()
        return self

    def signal_stop(self) -> None:
        """Ask the thread to stop after the delivery it is making; :meth:`stop` waits and releases the lease."""
        self._stop.set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the loop, wait (at most ``timeout`` in all) for the turns running, release the lease."""
        self._stop.set()
        until = None if timeout is None else time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            running = list(self._running)
        wait(running, timeout=None if until is None else max(0.0, until - time.monotonic()))
        self._turns.shutdown(wait=False, cancel_futures=True)
        try:
            self.release()
        finally:
            self._sender.close()

    def _loop(self, poll_seconds: float) -> None:
        while not self._stop.is_set():
            try:
                self._start_turns()  # not waited for: a turn still running keeps its subscription busy
            except Exception as exc:
                if database_unreachable(exc):  # PostgreSQL away: a line a poll, not a traceback
                    log.warning("webhook delivery waits for the database (%s)", type(exc).__name__)
                else:
                    log.exception("a webhook delivery round failed")
            self._stop.wait(poll_seconds)
