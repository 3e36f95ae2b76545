"""Every table of a data home's catalog, for ``gitmem migrate`` and ``gitmem db copy``.

Each part keeps its own migrations beside its code (the catalog, tasks, dreams, profiles, review, web
sessions, webhooks); this module is where they are listed together, in an order that satisfies their
dependencies (the webhooks' triggers watch ``stores`` and ``dreams``). It lives with the agents because
it must see every part, and the agents' layer is the lowest that does.

:func:`copy_catalog` moves a home's catalog rows from one database to another (SQLite to PostgreSQL):
table by table in an order that keeps references whole and fires no trigger that would add rows (the
outbox is copied before any subscription exists, so the fan-out adds nothing; subscriptions come last).
The stores' indexes are not rows to copy: they are a cache of Git, which :func:`catch_up_index` fills
wherever the home's indexes live (in the target database once the catalog is there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gitmem.agents.dreams.tables import MIGRATIONS as DREAMS
from gitmem.agents.review.review import Reviews
from gitmem.agents.tasks.tables import MIGRATIONS as TASKS
from gitmem.banks.profiles import MIGRATIONS as PROFILES
from gitmem.db import Database
from gitmem.db.jobs import MIGRATIONS as JOBS
from gitmem.db.migrations import Migration, migrate, pending
from gitmem.engine.catalog.catalog import MIGRATIONS as CATALOG
from gitmem.engine.catalog.catalog import store_info
from gitmem.engine.catalog.user_emails import UserEmails
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.web_sessions import WebSessions
from gitmem.errors import Conflict
from gitmem.model import StoreInfo
from gitmem.webhooks.tables import MIGRATIONS as WEBHOOKS


def home_migrations() -> tuple[Migration, ...]:
    """Every migration of a home's catalog, in the order they apply."""
    return (
        *CATALOG,
        *UserEmails.MIGRATIONS,
        *TASKS,
        *DREAMS,
        *PROFILES,
        *Reviews.MIGRATIONS,
        *WebSessions.MIGRATIONS,
        *WEBHOOKS,
        *JOBS,
    )


def migrate_home(db: Database, on_step: Callable[[Migration], None] | None = None) -> list[Migration]:
    """Bring ``db`` up to the newest schema (under the migration lock); the steps applied."""
    return migrate(db, home_migrations(), on_step)


def pending_steps(db: Database) -> list[Migration]:
    return pending(db, home_migrations())


# Parents before children; the outbox and its deliveries before the subscriptions (see the docstring).
COPIED_TABLES = (
    "workspaces",
    "credentials",
    "user_emails",
    "stores",
    "workers",
    "worker_stores",
    "tasks",
    "task_stores",
    "task_events",
    "dreams",
    "dream_workers",
    "profiles",
    "store_reviews",
    "ui_sessions",
    "webhook_outbox",
    "webhook_deliveries",
    "webhook_watermarks",
    "webhooks",
    "erasures",
)
IDENTITY_KEYS = {"webhook_outbox": "seq", "erasures": "seq"}  # PostgreSQL's counters, moved past the copied values
BATCH = 500


@dataclass
class CopyReport:
    rows: dict[str, int] = field(default_factory=dict)
    stores: list[StoreInfo] = field(default_factory=list)


def copy_catalog(source: Database, target: Database, progress: Callable[[str, int], None] | None = None) -> CopyReport:
    """Copy every catalog row of ``source`` into ``target`` (made to the newest schema first, and
    empty: a catalog is not merged into another). ``progress(table, rows)`` after each batch."""
    migrate_home(source)
    migrate_home(target)
    report = CopyReport()
    with target.transaction() as tx:
        if tx.execute("SELECT count(*) FROM workspaces").fetchone()[0]:
            raise Conflict(f"{target.display_name} holds a catalog already; copy into an empty database")
        for table in COPIED_TABLES:
            rows = source.execute(f"SELECT * FROM {table}").fetchall()  # noqa: S608  table and column names from COPIED_TABLES and the schema
            if rows:
                columns = list(rows[0].keys())
                sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"  # noqa: S608  table and column names from COPIED_TABLES and the schema
                for start in range(0, len(rows), BATCH):
                    batch = rows[start : start + BATCH]
                    tx.executemany(sql, [tuple(r) for r in batch])
                    if progress is not None:
                        progress(table, len(batch))
            report.rows[table] = len(rows)
            key = IDENTITY_KEYS.get(table)
            if key and rows and target.dialect == "postgresql":
                tx.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', '{key}'), (SELECT max({key}) FROM {table}))"  # noqa: S608  table and column names from COPIED_TABLES and the schema
                )
    report.stores = [store_info(r) for r in target.execute("SELECT * FROM stores ORDER BY created_at")]
    return report


def catch_up_index(gm: Gitmem, info: StoreInfo) -> None:
    """Bring a store's index up to its history (built from nothing where there is none yet)."""
    with gm.leases():  # a copy of every store's index holds one open at a time
        gm.store(info.workspace_id, info.id).index.catch_up()


def count_rows(db: Database) -> int:
    """Rows :func:`copy_catalog` would copy (for a progress bar)."""
    return sum(int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) for table in COPIED_TABLES)  # noqa: S608  table and column names from COPIED_TABLES and the schema


__all__ = [
    "COPIED_TABLES",
    "CopyReport",
    "catch_up_index",
    "copy_catalog",
    "count_rows",
    "home_migrations",
    "migrate_home",
]
