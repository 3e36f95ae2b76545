"""Background rounds that run once across every process and node of a home (the retention round).

Every server process schedules the same rounds, so each round must be claimed before it runs:

- :func:`claim_round`: the round of ``name`` is due when the last one started at least ``every`` seconds
  ago (less a tenth, for timers that drift); the first process to ask, under the job's lock, records
  that it starts one now, and every other process asking within the interval is told no. So a round
  runs once an interval across the cluster, not once an interval on each node.
- :func:`holding`: while a round runs, a lock no other process can take (PostgreSQL: a session-level
  ``pg_try_advisory_lock`` on a connection kept for the round; SQLite: an ``flock`` beside the
  database). A round longer than the interval is therefore never joined by a second one. Both locks die
  with their holder (its connection, its process), so a node killed mid-round blocks nothing.

Other background work claims its own rows in the catalog's transactions, which hold the catalog lock on
every engine: a dream is moved from ``pending`` to ``running`` by exactly one runner
(:meth:`gitmem.agents.dreams.dreams.Dreams.claim_next`), and webhook delivery has one lease holder
(:mod:`gitmem.webhooks.delivery`).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator

from gitmem.db import Database, PostgresDatabase, SQLiteDatabase, lock_id
from gitmem.db.migrations import Migration, migrate
from gitmem.errors import StoreBusy
from gitmem.git.repository import file_lock

SCHEMA = """
CREATE TABLE IF NOT EXISTS job_rounds (name TEXT PRIMARY KEY, started_at INTEGER NOT NULL, owner TEXT NOT NULL);
"""
MIGRATIONS = (Migration("jobs", 1, SCHEMA),)
DRIFT = 0.9  # a round is due after this share of its interval: timers of different nodes drift


def claim_round(db: Database, name: str, every_seconds: float, owner: str, *, at: float | None = None) -> bool:
    """Whether the caller should run the round of ``name`` now (see the module docstring). ``at``: the
    wall-clock time of the claim (default now: rounds are scheduled in real time on every node)."""
    migrate(db, MIGRATIONS)
    now = int((time.time() if at is None else at) * 1_000_000)
    with db.transaction() as tx:
        tx.lock(f"gitmem:job:{name}")
        row = tx.execute("SELECT started_at FROM job_rounds WHERE name=?", (name,)).fetchone()
        if row is not None and now - int(row[0]) < every_seconds * DRIFT * 1_000_000:
            return False
        tx.execute(
            "INSERT INTO job_rounds (name, started_at, owner) VALUES (?,?,?) ON CONFLICT (name) DO UPDATE"
            " SET started_at=excluded.started_at, owner=excluded.owner",
            (name, now, owner),
        )
    return True


@contextlib.contextmanager
def holding(db: Database, name: str) -> Iterator[bool]:
    """``True`` inside if this process holds the round's lock (no wait); ``False`` if another does."""
    if isinstance(db, PostgresDatabase):
        with db.connection() as conn:
            key = lock_id(f"gitmem:round:{name}")
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not (row and row[0]):
                yield False
                return
            try:
                yield True
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return
    assert isinstance(db, SQLiteDatabase)  # noqa: S101  narrows the type for mypy; never a check of input
    path = db.path.with_name(f"{db.path.name}-{re.sub(r'[^a-z0-9]+', '-', name.lower())}.lock")
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(file_lock(path, timeout=0, busy=name))
        except StoreBusy:
            yield False
            return
        yield True


__all__ = ["MIGRATIONS", "claim_round", "holding"]
