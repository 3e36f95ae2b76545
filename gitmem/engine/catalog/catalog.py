"""The catalog: workspaces, API keys and users (hashed), and stores' metadata, on a :class:`Database`.

Shared by every process on a data home, and by every node of a cluster on PostgreSQL: short
transactions, each holding the catalog's write lock (:data:`CATALOG_LOCK`: SQLite's ``BEGIN
IMMEDIATE`` or one ``pg_advisory_xact_lock``) so a count checked before an insert cannot race. Reads
see the committed rows, so a key revoked on one node holds on every other at once. Every change is
also announced (:meth:`Catalog.changed`, over ``LISTEN/NOTIFY`` on PostgreSQL), and :attr:`Catalog.cache`
keeps what each write asks only while this process hears every announcement
(:mod:`gitmem.engine.catalog.cache`). Secrets are
shown once and stored as SHA-256 digests (they are long random strings, so a fast hash is enough).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitmem import ids
from gitmem.clock import Clock, from_micros, system_clock, to_micros
from gitmem.db import (
    CATALOG_LOCK,
    Database,
    PostgresDatabase,
    SQLiteDatabase,
    Transaction,
    integrity_errors,
    open_database,
)
from gitmem.db.migrations import Migration, migrate
from gitmem.engine.catalog.cache import CatalogCache
from gitmem.engine.catalog.erasures import MIGRATIONS as ERASURES
from gitmem.engine.catalog.erasures import Erasure, ErasureLedger
from gitmem.errors import AuthenticationFailed, InvalidRequest, NotFound
from gitmem.model import Actor, Role, StoreInfo, StoreKind

SCHEMA = """
CREATE TABLE IF NOT EXISTS workspaces (
    id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS credentials (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, workspace_id TEXT NOT NULL, name TEXT NOT NULL,
    role TEXT NOT NULL, secret_hash TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL,
    revoked_at INTEGER, task_id TEXT);
CREATE TABLE IF NOT EXISTS stores (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,
    metadata TEXT NOT NULL, kind TEXT NOT NULL, encrypted INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, archived_at INTEGER);
CREATE INDEX IF NOT EXISTS stores_workspace ON stores (workspace_id, created_at, id);
"""
MIGRATIONS = (Migration("catalog", 1, SCHEMA), *ERASURES)
CHANGES = "gitmem_catalog"  # the channel of :meth:`Catalog.on_change`: "<kind> <id>"

ROLES: tuple[Role, ...] = ("admin", "read-write", "read-only")
_SECRET_PREFIX = {"api_key": "gm_key_", "user": "gm_usr_", "task": "gm_tsk_"}


@dataclass(frozen=True)
class Workspace:
    id: str
    name: str
    created_at: dt.datetime
    settings: dict[str, object]


@dataclass(frozen=True)
class Credential:
    """An API key, a user's token or a task's token (the secret itself is never kept)."""

    id: str
    kind: str  # api_key | user | task
    workspace_id: str
    name: str
    role: Role
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    task_id: str | None = None


@dataclass(frozen=True)
class Principal:
    """Who is calling: their workspace, the actor their writes are attributed to, and their role."""

    workspace_id: str
    actor: Actor
    role: Role
    credential_id: str
    task_id: str | None = None

    @property
    def can_write(self) -> bool:
        return self.role in ("admin", "read-write")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _credential(row: Any) -> Credential:
    return Credential(
        row["id"],
        row["kind"],
        row["workspace_id"],
        row["name"],
        row["role"],
        from_micros(row["created_at"]),
        from_micros(row["revoked_at"]) if row["revoked_at"] is not None else None,
        row["task_id"],
    )


def _principal(row: Any) -> Principal:
    actor_type = {"api_key": "api_actor", "user": "user_actor", "task": "task_actor"}[row["kind"]]
    return Principal(
        row["workspace_id"],
        Actor(actor_type, row["id"]),  # type: ignore[arg-type]
        row["role"],
        row["id"],
        row["task_id"],
    )


def store_info(row: Any) -> StoreInfo:
    return StoreInfo(
        id=row["id"],
        workspace_id=row["workspace_id"],
        name=row["name"],
        description=row["description"],
        metadata=json.loads(row["metadata"]),
        created_at=from_micros(row["created_at"]),
        updated_at=from_micros(row["updated_at"]),
        archived_at=from_micros(row["archived_at"]) if row["archived_at"] is not None else None,
        kind=row["kind"],
        encrypted=bool(row["encrypted"]),
    )


class CatalogBusy(Exception):
    """Raised inside :meth:`Catalog.without_waiting` where the work would have had to wait."""


class Catalog:
    def __init__(self, database: Database | Path, clock: Clock = system_clock) -> None:
        self.db = database if isinstance(database, Database) else SQLiteDatabase(database)
        self.path = self.db.path if isinstance(self.db, SQLiteDatabase) else None
        self.clock = clock
        migrate(self.db, MIGRATIONS)
        self.cache = CatalogCache(self.db, self.on_change)
        self.erasures = ErasureLedger(self.db)  # what was erased, for restores (gitmem.engine.catalog.erasures)

    @classmethod
    def for_home(cls, home: Path, url: str | None = None, clock: Clock = system_clock) -> Catalog:
        """The catalog of a data home: PostgreSQL at ``url``, else ``catalog.sqlite3`` in the home."""
        return cls(open_database(url, home / "catalog.sqlite3"), clock)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A write transaction holding the catalog's write lock (every writer of every node takes turns)."""
        with self.db.transaction() as tx:
            tx.lock(CATALOG_LOCK)
            yield tx

    def ensure_schema(self, migrations: tuple[Migration, ...]) -> None:
        """Other engine modules (tasks, profiles, dreams) add their tables through this."""
        migrate(self.db, migrations)

    @staticmethod
    def changed(tx: Transaction, kind: str, key: str) -> None:
        """Announce, when ``tx`` commits, that a ``kind`` row (credential, store, workspace, a workspace's
        webhooks) changed."""
        tx.notify(CHANGES, f"{kind} {key}")

    def on_change(self, callback: Callable[[str, str], None]) -> None:
        """Call ``callback(kind, id)`` after any node commits such a change (``("*", "")``: maybe missed some)."""
        self.db.listen(CHANGES, lambda payload: callback(*([*payload.split(" ", 1), ""])[:2]))

    def close(self) -> None:
        self.db.close()

    def _now(self) -> int:
        return to_micros(self.clock())

    # -- workspaces -------------------------------------------------------------------------------

    def create_workspace(self, name: str) -> Workspace:
        if not name or len(name) > 255:
            raise InvalidRequest("a workspace name is 1 to 255 characters")
        ws_id = ids.new_id(ids.WORKSPACE)
        try:
            with self.transaction() as db:
                db.execute("INSERT INTO workspaces (id, name, created_at) VALUES (?,?,?)", (ws_id, name, self._now()))
        except integrity_errors():
            raise InvalidRequest(f"a workspace named {name!r} exists") from None
        return self.workspace(ws_id)

    def _workspace(self, row: Any) -> Workspace:
        return Workspace(row["id"], row["name"], from_micros(row["created_at"]), json.loads(row["settings"]))

    def workspace(self, workspace_id: str) -> Workspace:
        row = self.db.execute("SELECT * FROM workspaces WHERE id=?", (workspace_id,)).fetchone()
        if row is None:
            raise NotFound(f"workspace {workspace_id} not found")
        return self._workspace(row)

    def workspace_by_name(self, name: str) -> Workspace | None:
        row = self.db.execute("SELECT * FROM workspaces WHERE name=?", (name,)).fetchone()
        return self._workspace(row) if row else None

    def list_workspaces(self) -> list[Workspace]:
        return [self._workspace(r) for r in self.db.execute("SELECT * FROM workspaces ORDER BY created_at")]

    def update_workspace_settings(self, workspace_id: str, **settings: object) -> Workspace:
        with self.transaction() as db:
            current = json.loads(
                db.execute("SELECT settings FROM workspaces WHERE id=?", (workspace_id,)).fetchone()[0]
            )
            current.update(settings)
            db.execute("UPDATE workspaces SET settings=? WHERE id=?", (json.dumps(current), workspace_id))
            self.changed(db, "workspace", workspace_id)
        return self.workspace(workspace_id)

    # -- credentials ------------------------------------------------------------------------------

    def _create_credential(
        self, kind: str, workspace_id: str, name: str, role: Role, task_id: str | None = None
    ) -> tuple[Credential, str]:
        if role not in ROLES:
            raise InvalidRequest(f"role must be one of {', '.join(ROLES)}")
        self.workspace(workspace_id)
        prefix = {"api_key": ids.API_KEY, "user": ids.USER, "task": ids.TASK}[kind]
        cred_id = task_id if kind == "task" and task_id else ids.new_id(prefix)
        secret = _SECRET_PREFIX[kind] + secrets.token_urlsafe(32)
        with self.transaction() as db:
            db.execute(
                "INSERT INTO credentials (id, kind, workspace_id, name, role, secret_hash, created_at,"
                " task_id) VALUES (?,?,?,?,?,?,?,?)",
                (cred_id, kind, workspace_id, name, role, hash_secret(secret), self._now(), task_id),
            )
        return self.credential(cred_id), secret

    def create_api_key(self, workspace_id: str, name: str, role: Role = "admin") -> tuple[Credential, str]:
        return self._create_credential("api_key", workspace_id, name, role)

    def create_user(self, workspace_id: str, name: str, role: Role = "read-write") -> tuple[Credential, str]:
        return self._create_credential("user", workspace_id, name, role)

    def create_task_token(self, workspace_id: str, task_id: str) -> tuple[Credential, str]:
        return self._create_credential("task", workspace_id, task_id, "read-write", task_id=task_id)

    def credential(self, cred_id: str) -> Credential:
        row = self.db.execute("SELECT * FROM credentials WHERE id=?", (cred_id,)).fetchone()
        if row is None:
            raise NotFound(f"{cred_id} not found")
        return _credential(row)

    def list_credentials(self, workspace_id: str | None, kind: str) -> list[Credential]:
        sql = "SELECT * FROM credentials WHERE kind=?"
        args: list[object] = [kind]
        if workspace_id is not None:
            sql += " AND workspace_id=?"
            args.append(workspace_id)
        return [_credential(r) for r in self.db.execute(sql + " ORDER BY created_at", args)]

    def list_api_keys(self, workspace_id: str | None = None) -> list[Credential]:
        return self.list_credentials(workspace_id, "api_key")

    def list_users(self, workspace_id: str | None = None) -> list[Credential]:
        return self.list_credentials(workspace_id, "user")

    def revoke(self, cred_id: str) -> Credential:
        with self.transaction() as db:
            updated = db.execute(
                "UPDATE credentials SET revoked_at=? WHERE id=? AND revoked_at IS NULL", (self._now(), cred_id)
            ).rowcount
            self.changed(db, "credential", cred_id)
        if not updated:
            self.credential(cred_id)  # NotFound if it never existed
        return self.credential(cred_id)

    revoke_api_key = revoke
    revoke_user = revoke

    def authenticate(self, secret: str | None) -> Principal:
        if not secret:
            raise AuthenticationFailed("an API key is required: send x-api-key or Authorization: Bearer")
        row = self.db.execute("SELECT * FROM credentials WHERE secret_hash=?", (hash_secret(secret),)).fetchone()
        if row is None or row["revoked_at"] is not None:
            raise AuthenticationFailed("invalid API key")
        return _principal(row)

    def principal(self, cred_id: str) -> Principal | None:
        """The caller a credential id stands for while it is active (a web session keeps the id, not
        the secret); ``None`` once it is revoked or gone."""
        row = self.db.execute("SELECT * FROM credentials WHERE id=?", (cred_id,)).fetchone()
        return _principal(row) if row is not None and row["revoked_at"] is None else None

    def authenticate_now(self, secret: str) -> Principal | None:
        """:meth:`authenticate` that never waits: ``None`` if SQLite is busy (then call
        :meth:`authenticate`, which waits). For an event loop, where a wait would stall every request.

        No cache: the lookup is one indexed read of a committed row, as cheap as checking a revocation
        counter would be, so a key revoked by any process fails at once in every other."""
        try:
            with self.without_waiting():
                return self.authenticate(secret)
        except CatalogBusy:
            return None

    @contextlib.contextmanager
    def without_waiting(self) -> Iterator[None]:
        """Within it, this thread's catalog reads never wait for a lock: SQLite being busy, or an attempt
        to write, raises :class:`CatalogBusy` (redo the work outside, where it may wait). PostgreSQL's
        reads never wait for a writer, but may wait for a pooled connection (all busy, or the server
        away): that is :class:`CatalogBusy` too."""
        if isinstance(self.db, PostgresDatabase):
            import psycopg_pool

            try:
                with self.db.without_waiting():
                    yield
            except psycopg_pool.PoolTimeout as exc:
                raise CatalogBusy(str(exc)) from exc
            return
        if not isinstance(self.db, SQLiteDatabase):
            yield
            return
        try:
            with self.db.without_waiting():
                yield
        except sqlite3.OperationalError as exc:
            raise CatalogBusy(str(exc)) from exc

    # -- stores -----------------------------------------------------------------------------------

    def insert_store(
        self,
        workspace_id: str,
        store_id: str,
        name: str,
        description: str,
        metadata: dict[str, str],
        kind: StoreKind,
        encrypted: bool,
        max_shared: int,
    ) -> StoreInfo:
        now = self._now()
        with self.transaction() as db:
            if kind == "shared":
                (live,) = db.execute(
                    "SELECT count(*) FROM stores WHERE workspace_id=? AND kind='shared' AND archived_at IS NULL",
                    (workspace_id,),
                ).fetchone()
                if live >= max_shared:
                    from gitmem.errors import LimitExceeded

                    raise LimitExceeded(
                        f"a workspace keeps at most {max_shared} live shared stores; archive or delete one first"
                    )
            db.execute(
                "INSERT INTO stores VALUES (?,?,?,?,?,?,?,?,?,NULL)",
                (store_id, workspace_id, name, description, json.dumps(metadata), kind, int(encrypted), now, now),
            )
        return self.store(store_id)

    def store(self, store_id: str) -> StoreInfo:
        row = self.db.execute("SELECT * FROM stores WHERE id=?", (store_id,)).fetchone()
        if row is None:
            raise NotFound(f"memory store {store_id} not found")
        return store_info(row)

    def list_stores(
        self,
        workspace_id: str,
        *,
        include_archived: bool,
        created_gte: dt.datetime | None,
        created_lte: dt.datetime | None,
        after: tuple[int, str] | None,
        limit: int,
        kinds: tuple[str, ...] = ("shared", "worker"),
    ) -> list[StoreInfo]:
        sql = f"SELECT * FROM stores WHERE workspace_id=? AND kind IN ({','.join('?' * len(kinds))})"  # noqa: S608  placeholders and the code's own column names; values bound
        args: list[object] = [workspace_id, *kinds]
        if not include_archived:
            sql += " AND archived_at IS NULL"
        if created_gte is not None:
            sql += " AND created_at>=?"
            args.append(to_micros(created_gte))
        if created_lte is not None:
            sql += " AND created_at<=?"
            args.append(to_micros(created_lte))
        if after is not None:
            sql += " AND (created_at<? OR (created_at=? AND id<?))"
            args += [after[0], after[0], after[1]]
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        return [store_info(r) for r in self.db.execute(sql, (*args, limit))]

    def update_store(self, store_id: str, **fields: object) -> StoreInfo:
        columns = {k: (json.dumps(v) if k == "metadata" else v) for k, v in fields.items()}
        columns["updated_at"] = self._now()
        assignments = ", ".join(f"{k}=?" for k in columns)
        with self.transaction() as db:
            db.execute(f"UPDATE stores SET {assignments} WHERE id=?", (*columns.values(), store_id))  # noqa: S608  placeholders and the code's own column names; values bound
            self.changed(db, "store", store_id)
        return self.store(store_id)

    def archive_store(self, store_id: str) -> StoreInfo:
        now = self._now()
        with self.transaction() as db:
            db.execute(
                "UPDATE stores SET archived_at=coalesce(archived_at, ?), updated_at=? WHERE id=?", (now, now, store_id)
            )
            self.changed(db, "store", store_id)
        return self.store(store_id)

    def delete_store(self, store_id: str, tx: Transaction | None = None) -> None:
        """The store's row goes (in ``tx``, with whatever else it changes, if given), and the erasure
        ledger says so in the same transaction: a restore from an older backup deletes it again."""
        with contextlib.nullcontext(tx) if tx is not None else self.transaction() as db:
            gone = db.execute("DELETE FROM stores WHERE id=?", (store_id,)).rowcount
            if gone:
                self.erasures.record(Erasure(store_id, "store_deleted", self.clock()), db)
            self.changed(db, "store", store_id)


def principal_task_id(principal: Principal) -> str | None:
    """The task a principal acts for (a task token), else ``None``."""
    if principal.task_id:
        return principal.task_id
    return principal.actor.id if principal.actor.type == "task_actor" else None
