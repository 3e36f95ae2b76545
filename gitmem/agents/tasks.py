"""Workers and tasks: which stores a task reads (the memory-store API).

- A **worker** has its own store (kind ``worker``: always read-write, never deleted, not counted
  among the workspace's shared stores) and a list of attached stores.
- A **task** belongs to a worker. It reads its worker's own store (read-write) plus up to 8 stores
  named in ``resources``, or, with none named, the stores attached to its worker. The list is frozen
  when the task is made: each store's name, description, access, instructions and folder name are
  kept in ``task_stores`` (guarded by triggers), so a later rename never reaches a running task.
- A task gets a token (a ``task`` credential whose id is the task's id): its writes are
  ``task_actor`` versions, and :func:`check_task_access` confines it to its frozen list.
- A task sees each store as ``/.little-worker/tasks/<task_id>/memory/<store-name-slug>/`` and gets a
  short markdown section for its context (:meth:`Tasks.memory_view`).
- Each task has an append-only event log (``task_events``; updates and deletes are refused by
  triggers while the task exists).
- A task ends (:meth:`Tasks.end_task`): its token is revoked in the shared catalog, so it stops working
  at once in every server process; its writes and events stay. A deleted task
  (:meth:`Tasks.delete_task`) is gone with its events and token; its versions keep its id as history.

No HTTP here: ``api/routers/workers.py`` and ``api/routers/tasks.py`` are thin shells over this.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from gitmem import ids
from gitmem.clock import from_micros
from gitmem.engine.catalog import principal_task_id
from gitmem.engine.home import HomeTables
from gitmem.engine.migrations import Migration, add_column, postgres_ddl
from gitmem.errors import (
    ArchivedStore,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PermissionDenied,
    TooLarge,
)
from gitmem.model import Actor, Note, Page, StoreInfo
from gitmem.rules.policy import check_store_fields, check_text

if TYPE_CHECKING:
    import datetime as dt

    from gitmem.engine.catalog import Principal
    from gitmem.engine.home import Gitmem

Access = Literal["read_write", "read_only"]
ACCESS_VALUES: tuple[Access, ...] = ("read_write", "read_only")

MAX_NAMED_STORES = 8  # stores a task names in resources, beside its worker's own
MAX_ATTACHED_STORES = 8  # stores attached to a worker (what a task reads when it names none)
MAX_INSTRUCTIONS_CHARS = 4096
MAX_PAGE = 100
MAX_CONTEXT_PATHS = 50  # note paths listed per store in the memory section
MAX_SLUG_CHARS = 80
MAX_EVENT_PAYLOAD_BYTES = 102_400
MOUNT_ROOT = "/.little-worker/tasks"
MAX_INT = 2**63 - 1  # SQLite's integers

_EVENT_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")

SCHEMA = """
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, name TEXT NOT NULL, own_store_id TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS workers_workspace ON workers (workspace_id, created_at, id);
CREATE TABLE IF NOT EXISTS worker_stores (
    worker_id TEXT NOT NULL REFERENCES workers (id) ON DELETE CASCADE, store_id TEXT NOT NULL,
    position INTEGER NOT NULL, PRIMARY KEY (worker_id, store_id));
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, worker_id TEXT NOT NULL, created_at INTEGER NOT NULL,
    created_by TEXT);
CREATE INDEX IF NOT EXISTS tasks_workspace ON tasks (workspace_id, created_at, id);
CREATE INDEX IF NOT EXISTS tasks_worker ON tasks (worker_id, created_at, id);
CREATE TABLE IF NOT EXISTS task_stores (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE, position INTEGER NOT NULL,
    store_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL, access TEXT NOT NULL,
    instructions TEXT NOT NULL, mount_name TEXT NOT NULL, own INTEGER NOT NULL,
    PRIMARY KEY (task_id, store_id), UNIQUE (task_id, mount_name));
CREATE TABLE IF NOT EXISTS task_events (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, payload TEXT NOT NULL, created_by TEXT,
    created_at INTEGER NOT NULL, PRIMARY KEY (task_id, seq));
"""


SQLITE_GUARDS = """
CREATE TRIGGER IF NOT EXISTS task_stores_frozen_update BEFORE UPDATE ON task_stores
BEGIN SELECT RAISE(ABORT, 'a task''s stores are frozen when the task is made'); END;
CREATE TRIGGER IF NOT EXISTS task_stores_frozen_delete BEFORE DELETE ON task_stores
WHEN EXISTS (SELECT 1 FROM tasks WHERE id = OLD.task_id)
BEGIN SELECT RAISE(ABORT, 'a task''s stores are frozen when the task is made'); END;
CREATE TRIGGER IF NOT EXISTS task_events_append_only_update BEFORE UPDATE ON task_events
BEGIN SELECT RAISE(ABORT, 'task events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS task_events_append_only_delete BEFORE DELETE ON task_events
WHEN EXISTS (SELECT 1 FROM tasks WHERE id = OLD.task_id)
BEGIN SELECT RAISE(ABORT, 'task events are append-only'); END;
"""
# The same guards in PostgreSQL: a trigger runs a function. Both raise an integrity error (SQLSTATE 23000).
POSTGRES_GUARDS = """
CREATE OR REPLACE FUNCTION gitmem_task_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' OR EXISTS (SELECT 1 FROM tasks WHERE id = OLD.task_id) THEN
        RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = '23000';
    END IF;
    RETURN OLD;
END $$;
CREATE OR REPLACE TRIGGER task_stores_frozen BEFORE UPDATE OR DELETE ON task_stores FOR EACH ROW
    EXECUTE FUNCTION gitmem_task_guard('a task''s stores are frozen when the task is made');
CREATE OR REPLACE TRIGGER task_events_append_only BEFORE UPDATE OR DELETE ON task_events FOR EACH ROW
    EXECUTE FUNCTION gitmem_task_guard('task events are append-only');
"""
MIGRATIONS = (
    Migration("tasks", 1, SCHEMA + SQLITE_GUARDS, postgres_ddl(SCHEMA) + POSTGRES_GUARDS),
    # Data homes made before tasks could end.
    Migration(
        "tasks",
        2,
        add_column("tasks", "ended_at", "INTEGER"),
        "ALTER TABLE tasks ADD COLUMN IF NOT EXISTS ended_at BIGINT",
    ),
)


# -- values ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Worker:
    id: str
    workspace_id: str
    name: str
    own_store_id: str
    attached_store_ids: tuple[str, ...]
    created_at: dt.datetime


@dataclass(frozen=True)
class TaskStore:
    """One store in a task's frozen list, as it was when the task was made."""

    store_id: str
    name: str
    description: str
    access: Access
    instructions: str
    mount_name: str  # the folder's name under the task's memory root
    own: bool  # the worker's own store


@dataclass(frozen=True)
class Task:
    id: str
    workspace_id: str
    worker_id: str
    created_at: dt.datetime
    stores: tuple[TaskStore, ...]  # the worker's own store first, then the named or attached ones
    created_by: Actor | None = None
    ended_at: dt.datetime | None = None  # set once the task is ended: its token no longer works

    @property
    def memory_root(self) -> str:
        return memory_root(self.id)

    def mount_path(self, store: TaskStore) -> str:
        return f"{self.memory_root}{store.mount_name}/"


@dataclass(frozen=True)
class Event:
    id: str
    task_id: str
    seq: int
    type: str
    payload: dict[str, Any]
    created_by: Actor | None
    created_at: dt.datetime


@dataclass(frozen=True)
class StoreView:
    """A task's store as it stands now: its frozen snapshot and the note paths it holds."""

    store: TaskStore
    mount_path: str
    access: Access  # the frozen access, or read_only once the store is archived
    available: bool  # False once the store has been deleted
    archived: bool
    paths: tuple[str, ...]  # up to the cap, e.g. ("/people/sam.md", ...)
    total: int  # notes in the store
    review: str | None = None  # under review: by whom and when, for the section


@dataclass(frozen=True)
class MemoryView:
    task_id: str
    root: str
    stores: tuple[StoreView, ...]
    context: str  # the markdown section for the model's context


# -- helpers ---------------------------------------------------------------------------------------


def memory_root(task_id: str) -> str:
    return f"{MOUNT_ROOT}/{task_id}/memory/"


def slugify(name: str) -> str:
    """A folder name from a store name: ASCII-folded, lowercase, runs of other characters as one
    hyphen, trimmed (``"Team notes (2026)"`` -> ``team-notes-2026``); ``store`` if nothing is left."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", folded).strip("-")
    return slug[:MAX_SLUG_CHARS].rstrip("-") or "store"


def unique_slugs(names: Iterable[str]) -> list[str]:
    """Slugs for the names in order; a repeat gets ``-2``, ``-3``, ... (never one already taken)."""
    used: set[str] = set()
    out = []
    for name in names:
        base = slugify(name)
        candidate, n = base, 2
        while candidate in used:
            candidate, n = f"{base}-{n}", n + 1
        used.add(candidate)
        out.append(candidate)
    return out


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"limit must be between 1 and {MAX_PAGE}")


def _actor_text(actor: Actor | None) -> str | None:
    return actor.trailer() if actor is not None else None


def _field(label: str, text: str) -> list[str]:
    """``- Label: text`` for one line; a quote inside the list item for several."""
    lines = text.strip().splitlines()
    if len(lines) == 1:
        return [f"- {label}: {lines[0]}"]
    return [f"- {label}:", *(f"  > {line}".rstrip() for line in lines)]


# -- the engine ------------------------------------------------------------------------------------


class Tasks(HomeTables):
    """Workers, tasks, their frozen store lists, memory views and event logs on one data home."""

    MIGRATIONS = MIGRATIONS

    # -- workers ----------------------------------------------------------------------------------

    def create_worker(self, workspace_id: str, name: str, attached_store_ids: Sequence[str] = ()) -> Worker:
        """A worker with its own store (kind ``worker``) and the given stores attached."""
        if name is None:
            raise InvalidRequest("a worker needs a name")
        check_store_fields(name, None, None)
        self.catalog.workspace(workspace_id)
        attached = self._check_attachable(workspace_id, attached_store_ids, own_store_id=None)
        description = f"The own memory of worker {name}: read and written by every one of its tasks."
        own = self.gm.create_store(workspace_id, name, description=description[:1024], kind="worker")
        worker_id = ids.new_id(ids.WORKER)
        try:
            with self.catalog.transaction() as db:
                db.execute(
                    "INSERT INTO workers (id, workspace_id, name, own_store_id, created_at) VALUES (?,?,?,?,?)",
                    (worker_id, workspace_id, name, own.id, self._now()),
                )
                db.executemany(
                    "INSERT INTO worker_stores (worker_id, store_id, position) VALUES (?,?,?)",
                    [(worker_id, sid, i) for i, sid in enumerate(attached)],
                )
        except BaseException:
            self.gm.delete_store(workspace_id, own.id, force=True)
            raise
        return self.get_worker(workspace_id, worker_id)

    def _worker_row(self, workspace_id: str, worker_id: str) -> Any:
        row = None
        if ids.has_prefix(worker_id, ids.WORKER):
            row = self.db.execute(
                "SELECT * FROM workers WHERE id=? AND workspace_id=?", (worker_id, workspace_id)
            ).fetchone()
        if row is None:
            raise NotFound(f"worker {worker_id} not found")
        return row

    def _worker(self, row: Any) -> Worker:
        # Stores deleted since they were attached drop out of the list.
        attached = tuple(
            r[0]
            for r in self.db.execute(
                "SELECT ws.store_id FROM worker_stores ws JOIN stores s ON s.id = ws.store_id"
                " WHERE ws.worker_id=? ORDER BY ws.position",
                (row["id"],),
            )
        )
        return Worker(
            row["id"], row["workspace_id"], row["name"], row["own_store_id"], attached, from_micros(row["created_at"])
        )

    def get_worker(self, workspace_id: str, worker_id: str) -> Worker:
        return self._worker(self._worker_row(workspace_id, worker_id))

    def worker_of_store(self, store_id: str) -> str | None:
        """The worker whose own store this is, if any."""
        row = self.db.execute("SELECT id FROM workers WHERE own_store_id=?", (store_id,)).fetchone()
        return row[0] if row else None

    def list_workers(self, workspace_id: str, limit: int = 20, page: str | None = None) -> Page[Worker]:
        """Newest first."""
        _check_limit(limit)
        sql, args = "SELECT * FROM workers WHERE workspace_id=?", [workspace_id]
        if page:
            micros, after_id = self.gm.page_tokens.decode(page, "workers", int, str)
            sql += " AND (created_at<? OR (created_at=? AND id<?))"
            args += [micros, micros, after_id]
        rows = self.db.execute(sql + " ORDER BY created_at DESC, id DESC LIMIT ?", (*args, limit + 1)).fetchall()
        items = [self._worker(r) for r in rows[:limit]]
        token = (
            self.gm.page_tokens.encode("workers", rows[limit - 1]["created_at"], rows[limit - 1]["id"])
            if len(rows) > limit
            else None
        )
        return Page(items, token)

    def set_attached_stores(self, workspace_id: str, worker_id: str, store_ids: Sequence[str]) -> Worker:
        """Replace the stores attached to a worker. Tasks already made keep their frozen lists."""
        row = self._worker_row(workspace_id, worker_id)
        attached = self._check_attachable(workspace_id, store_ids, own_store_id=row["own_store_id"])
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM worker_stores WHERE worker_id=?", (worker_id,))
            db.executemany(
                "INSERT INTO worker_stores (worker_id, store_id, position) VALUES (?,?,?)",
                [(worker_id, sid, i) for i, sid in enumerate(attached)],
            )
        return self.get_worker(workspace_id, worker_id)

    def attach_store(self, workspace_id: str, worker_id: str, store_id: str) -> Worker:
        """Attach one more store (a no-op if it is attached already)."""
        worker = self.get_worker(workspace_id, worker_id)
        if store_id in worker.attached_store_ids:
            return worker
        return self.set_attached_stores(workspace_id, worker_id, [*worker.attached_store_ids, store_id])

    def detach_store(self, workspace_id: str, worker_id: str, store_id: str) -> Worker:
        worker = self.get_worker(workspace_id, worker_id)
        if store_id not in worker.attached_store_ids:
            raise NotFound(f"memory store {store_id} is not attached to worker {worker_id}")
        return self.set_attached_stores(
            workspace_id, worker_id, [s for s in worker.attached_store_ids if s != store_id]
        )

    def _check_attachable(
        self, workspace_id: str, store_ids: Sequence[str] | None, own_store_id: str | None
    ) -> list[str]:
        store_ids = list(store_ids or [])
        if len(store_ids) > MAX_ATTACHED_STORES:
            raise LimitExceeded(f"a worker has at most {MAX_ATTACHED_STORES} attached memory stores")
        if len(set(store_ids)) != len(store_ids):
            raise InvalidRequest("a memory store is attached at most once")
        for store_id in store_ids:
            if not isinstance(store_id, str):
                raise InvalidRequest("memory store ids are strings")
            if store_id == own_store_id:
                raise InvalidRequest(
                    f"memory store {store_id} is the worker's own store; it is always part"
                    " of its tasks and is not attached"
                )
            self._usable_store(workspace_id, store_id)
        return store_ids

    def _usable_store(self, workspace_id: str, store_id: str) -> StoreInfo:
        info = self.gm.get_store(workspace_id, store_id)  # NotFound for another workspace's store
        if info.kind == "bank":
            # The same answer as a missing store: an id's kind is not told to whoever cannot read it.
            raise NotFound(f"memory store {store_id} not found")
        if info.archived_at is not None:
            raise ArchivedStore(f"memory store {store_id} is archived; a task cannot be given an archived store")
        return info

    # -- tasks ------------------------------------------------------------------------------------

    def create_task(
        self,
        workspace_id: str,
        worker_id: str,
        resources: Sequence[Mapping[str, Any]] | None = None,
        *,
        created_by: Actor | None = None,
    ) -> tuple[Task, str]:
        """Make a task and its token (the secret, shown once).

        ``resources``: up to 8 ``{"type": "memory_store", "memory_store_id", "access", "instructions"}``.
        With none, the task reads the stores attached to its worker (read-write; an attached store
        archived since is read-only). The worker's own store is always first, read-write.
        """
        worker_row = self._worker_row(workspace_id, worker_id)
        own = self.gm.get_store(workspace_id, worker_row["own_store_id"])
        picked: list[tuple[StoreInfo, Access, str]] = []
        if resources:
            picked = self._named(workspace_id, resources, own_store_id=own.id)
        else:
            for store_id in self._worker(worker_row).attached_store_ids:
                try:
                    info = self.gm.get_store(workspace_id, store_id)
                except NotFound:
                    continue  # deleted in between
                picked.append((info, "read_only" if info.archived_at is not None else "read_write", ""))
        entries = [(own, "read_write", "", True)] + [(info, access, text, False) for info, access, text in picked]
        slugs = unique_slugs(info.name for info, *_ in entries)

        task_id = ids.new_id(ids.TASK)
        with self.catalog.transaction() as db:
            db.execute(
                "INSERT INTO tasks (id, workspace_id, worker_id, created_at, created_by) VALUES (?,?,?,?,?)",
                (task_id, workspace_id, worker_id, self._now(), _actor_text(created_by)),
            )
            db.executemany(
                "INSERT INTO task_stores (task_id, position, store_id, name, description, access, instructions,"
                " mount_name, own) VALUES (?,?,?,?,?,?,?,?,?)",
                [
                    (task_id, i, info.id, info.name, info.description or "", access, text, slug, int(is_own))
                    for i, ((info, access, text, is_own), slug) in enumerate(zip(entries, slugs, strict=True))
                ],
            )
        try:
            _, secret = self.catalog.create_task_token(workspace_id, task_id)
        except BaseException:
            with self.catalog.transaction() as db:
                db.execute("DELETE FROM tasks WHERE id=?", (task_id,))
            raise
        return self.get_task(workspace_id, task_id), secret

    def _named(
        self, workspace_id: str, resources: Sequence[Mapping[str, Any]], own_store_id: str
    ) -> list[tuple[StoreInfo, Access, str]]:
        if isinstance(resources, str | bytes | Mapping) or not isinstance(resources, Sequence):
            raise InvalidRequest("resources must be a list")
        if len(resources) > MAX_NAMED_STORES:
            raise LimitExceeded(
                f"a task names at most {MAX_NAMED_STORES} memory stores in resources"
                f" (besides its worker's own store); got {len(resources)}"
            )
        seen: set[str] = set()
        out: list[tuple[StoreInfo, Access, str]] = []
        for n, resource in enumerate(resources):
            where = f"resources[{n}]"
            if not isinstance(resource, Mapping):
                raise InvalidRequest(f"{where} must be an object")
            unknown = set(resource) - {"type", "memory_store_id", "access", "instructions"}
            if unknown:
                raise InvalidRequest(f"{where} has unknown fields: {', '.join(sorted(map(str, unknown)))}")
            if resource.get("type", "memory_store") != "memory_store":
                raise InvalidRequest(f"{where}.type must be 'memory_store'")
            store_id = resource.get("memory_store_id")
            if not isinstance(store_id, str) or not store_id:
                raise InvalidRequest(f"{where}.memory_store_id is required")
            access = resource.get("access") or "read_write"
            if access not in ACCESS_VALUES:
                raise InvalidRequest(f"{where}.access must be 'read_write' or 'read_only'")
            instructions = resource.get("instructions") or ""
            if not isinstance(instructions, str):
                raise InvalidRequest(f"{where}.instructions must be a string")
            if len(instructions) > MAX_INSTRUCTIONS_CHARS:
                raise InvalidRequest(f"{where}.instructions must be at most {MAX_INSTRUCTIONS_CHARS} characters")
            if store_id in seen:
                raise InvalidRequest(f"memory store {store_id} is named twice in resources")
            seen.add(store_id)
            if store_id == own_store_id:
                raise InvalidRequest(
                    f"memory store {store_id} is the worker's own store: every task reads and"
                    " writes it already, so it is not named in resources"
                )
            out.append((self._usable_store(workspace_id, store_id), access, instructions))
        return out

    def _task(self, row: Any) -> Task:
        stores = tuple(
            TaskStore(
                r["store_id"],
                r["name"],
                r["description"],
                r["access"],
                r["instructions"],
                r["mount_name"],
                bool(r["own"]),
            )
            for r in self.db.execute("SELECT * FROM task_stores WHERE task_id=? ORDER BY position", (row["id"],))
        )
        return Task(
            row["id"],
            row["workspace_id"],
            row["worker_id"],
            from_micros(row["created_at"]),
            stores,
            Actor.from_trailer(row["created_by"] or ""),
            from_micros(row["ended_at"]) if row["ended_at"] is not None else None,
        )

    def _task_row(self, workspace_id: str, task_id: str) -> Any:
        row = None
        if isinstance(task_id, str) and ids.has_prefix(task_id, ids.TASK):
            row = self.db.execute(
                "SELECT * FROM tasks WHERE id=? AND workspace_id=?", (task_id, workspace_id)
            ).fetchone()
        if row is None:
            raise NotFound(f"task {task_id} not found")
        return row

    def get_task(self, workspace_id: str, task_id: str) -> Task:
        return self._task(self._task_row(workspace_id, task_id))

    def end_task(self, workspace_id: str, task_id: str) -> Task:
        """End a task: its token is revoked (every process reads the same catalog, so it stops working at
        once); its writes, events and stores stay. Ending an ended task changes nothing."""
        self._task_row(workspace_id, task_id)
        now = self._now()
        with self.catalog.transaction() as db:
            db.execute("UPDATE tasks SET ended_at=coalesce(ended_at, ?) WHERE id=?", (now, task_id))
            db.execute(
                "UPDATE credentials SET revoked_at=coalesce(revoked_at, ?) WHERE id=? AND kind='task'", (now, task_id)
            )
            self.catalog.changed(db, "credential", task_id)
        return self.get_task(workspace_id, task_id)

    def delete_task(self, workspace_id: str, task_id: str) -> None:
        """Delete a task with its token, frozen store list and events. The stores are untouched (its
        worker's own store too), and the versions it wrote keep its id as history."""
        self._task_row(workspace_id, task_id)
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM credentials WHERE id=? AND kind='task'", (task_id,))
            self.catalog.changed(db, "credential", task_id)
            db.execute("DELETE FROM tasks WHERE id=?", (task_id,))  # cascades to task_stores and task_events

    def list_tasks(
        self, workspace_id: str, worker_id: str | None = None, limit: int = 20, page: str | None = None
    ) -> Page[Task]:
        """Newest first, optionally one worker's."""
        _check_limit(limit)
        sql, args = "SELECT * FROM tasks WHERE workspace_id=?", [workspace_id]
        if worker_id:
            sql += " AND worker_id=?"
            args.append(worker_id)
        if page:
            micros, after_id = self.gm.page_tokens.decode(page, "tasks", int, str)
            sql += " AND (created_at<? OR (created_at=? AND id<?))"
            args += [micros, micros, after_id]
        rows = self.db.execute(sql + " ORDER BY created_at DESC, id DESC LIMIT ?", (*args, limit + 1)).fetchall()
        token = (
            self.gm.page_tokens.encode("tasks", rows[limit - 1]["created_at"], rows[limit - 1]["id"])
            if len(rows) > limit
            else None
        )
        return Page([self._task(r) for r in rows[:limit]], token)

    def task_access(self, task_id: str, store_id: str) -> Access | None:
        """The task's frozen access to the store, or ``None`` if the store is not in its list."""
        row = self.db.execute(
            "SELECT access FROM task_stores WHERE task_id=? AND store_id=?", (task_id, store_id)
        ).fetchone()
        return row[0] if row else None

    def task_store_ids(self, task_id: str) -> tuple[str, ...]:
        return tuple(
            r[0]
            for r in self.db.execute("SELECT store_id FROM task_stores WHERE task_id=? ORDER BY position", (task_id,))
        )

    # -- the memory view --------------------------------------------------------------------------

    def memory_view(self, workspace_id: str, task_id: str, max_paths: int = MAX_CONTEXT_PATHS) -> MemoryView:
        """Each store's folder, and the memory section for the task's context.

        Names, descriptions, instructions and access are the frozen ones; the note paths are the
        stores' current ones (up to ``max_paths`` a store)."""
        from gitmem.agents.review import Reviews  # review builds on tasks

        task = self.get_task(workspace_id, task_id)
        reviews = Reviews.of(self.gm)
        views = []
        for ts in task.stores:
            available, archived, total, review = True, False, 0, None
            paths: tuple[str, ...] = ()
            try:
                info = self.gm.get_store(workspace_id, ts.store_id)
                archived = info.archived_at is not None
                store = reviews.task_reader(self.gm.store(workspace_id, ts.store_id))
                listing = store.list(limit=max(1, min(max_paths, 1000)))
                paths = tuple(n.path for n in listing.items if isinstance(n, Note))[:max_paths]
                total = reviews.note_count(store)
                review = reviews.section_note(store)
            except NotFound:
                available = False
            access: Access = "read_only" if archived or not available else ts.access
            views.append(StoreView(ts, task.mount_path(ts), access, available, archived, paths, total, review))
        return MemoryView(task.id, task.memory_root, tuple(views), render_context(task, views))

    # -- events -----------------------------------------------------------------------------------

    def append_event(
        self, task_id: str, type: str, payload: Mapping[str, Any] | None = None, *, actor: Actor | None = None
    ) -> Event:
        """Add an event to the end of the task's log. There is no update and no delete."""
        if not isinstance(type, str) or not _EVENT_TYPE.fullmatch(type):
            raise InvalidRequest(
                "an event type is 1 to 64 characters of letters, digits and _ . : -,"
                " starting with a letter or digit (e.g. 'agent.message')"
            )
        payload = {} if payload is None else payload
        if not isinstance(payload, Mapping):
            raise InvalidRequest("an event payload is a JSON object")
        check_text(payload, "an event payload")
        try:
            text = json.dumps(dict(payload), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(f"an event payload must be plain JSON: {exc}") from None
        if len(text.encode("utf-8")) > MAX_EVENT_PAYLOAD_BYTES:
            raise TooLarge(f"an event payload is at most {MAX_EVENT_PAYLOAD_BYTES} bytes of JSON")
        event_id = ids.new_id("taskevt")
        with self.catalog.transaction() as db:
            if db.execute("SELECT 1 FROM tasks WHERE id=?", (task_id,)).fetchone() is None:
                raise NotFound(f"task {task_id} not found")
            (seq,) = db.execute(
                "SELECT coalesce(max(seq), 0) + 1 FROM task_events WHERE task_id=?", (task_id,)
            ).fetchone()
            db.execute(
                "INSERT INTO task_events (task_id, seq, id, type, payload, created_by, created_at)"
                " VALUES (?,?,?,?,?,?,?)",
                (task_id, seq, event_id, type, text, _actor_text(actor), self._now()),
            )
        row = self.db.execute("SELECT * FROM task_events WHERE id=?", (event_id,)).fetchone()
        return _event(row)

    def list_events(
        self,
        task_id: str,
        after_seq: int | None = None,
        limit: int = 20,
        page: str | None = None,
        types: Sequence[str] | None = None,
    ) -> Page[Event]:
        """Oldest first. ``after_seq`` or ``page`` (the previous page's ``next_page``) starts after an
        event; ``next_page`` is ``None`` on the last page."""
        _check_limit(limit)
        if page:
            (after_seq,) = self.gm.page_tokens.decode(page, f"events:{task_id}", int)
        if after_seq is not None and (
            isinstance(after_seq, bool) or not isinstance(after_seq, int) or not 0 <= after_seq <= MAX_INT
        ):
            raise InvalidRequest("after_seq must be a non-negative integer")
        sql, args = "SELECT * FROM task_events WHERE task_id=? AND seq>?", [task_id, after_seq or 0]
        if types:
            sql += f" AND type IN ({','.join('?' * len(types))})"
            args += list(types)
        rows = self.db.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit + 1)).fetchall()
        items = [_event(r) for r in rows[:limit]]
        token = self.gm.page_tokens.encode(f"events:{task_id}", items[-1].seq) if len(rows) > limit else None
        return Page(items, token)


def _event(row: Any) -> Event:
    return Event(
        row["id"],
        row["task_id"],
        row["seq"],
        row["type"],
        json.loads(row["payload"]),
        Actor.from_trailer(row["created_by"] or ""),
        from_micros(row["created_at"]),
    )


# -- the memory section ----------------------------------------------------------------------------


def render_context(task: Task, views: Sequence[StoreView]) -> str:
    """The ``## Memory`` section for a task's context: each store's folder, access, description,
    instructions and note paths; an empty store asks for its first note instead of listing."""
    count = len(views)
    lines = [
        "## Memory",
        "",
        f"You have {count} memory store{'s' if count != 1 else ''}, each a folder of notes under"
        f" `{task.memory_root}` that lasts from task to task. Before you start, read the notes that"
        " bear on your work. As you work, write down what the next task should know (decisions, facts,"
        " preferences, unfinished work) as short markdown notes at paths that say what they hold, and"
        " keep them current rather than adding near-copies. Every change is kept as a version. You can"
        " change a read-write store; a read-only store can only be read.",
    ]
    for view in views:
        ts = view.store
        title = f"### {ts.name}" + (" (this worker's own memory)" if ts.own else "")
        access = view.access.replace("_", "-") + (" (archived)" if view.archived else "")
        lines += ["", title, "", f"- Folder: `{view.mount_path}`", f"- Access: {access}"]
        if ts.description.strip():
            lines += _field("Description", ts.description)
        if ts.instructions.strip():
            lines += _field("Instructions", ts.instructions)
        if view.review:
            lines.append(f"- Review: {view.review}")
        if not view.available:
            lines += ["", "This store is no longer available: its folder is empty and cannot be written."]
        elif view.total == 0 and view.access == "read_write":
            lines += [
                "",
                "This store is empty. Create its first note when you learn something worth keeping,"
                f" for example `{view.mount_path}notes.md`.",
            ]
        elif view.total == 0:
            lines += ["", "This store is empty and read-only: there is nothing in it to read yet."]
        else:
            lines += ["", f"Notes ({view.total}):"]
            lines += [f"- `{path.lstrip('/')}`" for path in view.paths]
            more = view.total - len(view.paths)
            if more > 0:
                lines.append(f"- ... and {more} more (list the folder to see them)")
    return "\n".join(lines) + "\n"


# -- one Tasks a data home; the access check the HTTP layer calls ----------------------------------


def tasks_for(gm: Gitmem) -> Tasks:
    """The :class:`Tasks` of this data home (its tables are made on first use)."""
    return Tasks.of(gm)


def check_task_access(gm: Gitmem, principal: Principal, store_id: str, *, write: bool) -> None:
    """Confine a task's token to its frozen list: a store not in it is 404 (as if it did not exist),
    a write to a store it reads ``read_only`` is 403. Other principals pass unchanged."""
    task_id = principal_task_id(principal)
    if task_id is None:
        return
    access = tasks_for(gm).task_access(task_id, store_id)
    if access is None:
        raise NotFound(f"memory store {store_id} not found")
    if write and access != "read_write":
        raise PermissionDenied(f"task {task_id} has read-only access to memory store {store_id}")


def store_access(gm: Gitmem, principal: Principal, store_id: str) -> Access:
    """What the principal may do with the store: its role for keys and users; for a task, its frozen
    access (``NotFound`` outside its list). For handlers that decide per call, like the memory tool
    (``read_only=store_access(...) == "read_only"``)."""
    check_task_access(gm, principal, store_id, write=False)
    task_id = principal_task_id(principal)
    if not principal.can_write:
        return "read_only"
    if task_id is None:
        return "read_write"
    return tasks_for(gm).task_access(task_id, store_id) or "read_only"


def visible_store_ids(gm: Gitmem, principal: Principal) -> frozenset[str] | None:
    """The stores a principal may see in a listing: a task's frozen list, or ``None`` for no limit."""
    task_id = principal_task_id(principal)
    if task_id is None:
        return None
    return frozenset(tasks_for(gm).task_store_ids(task_id))


def refuse_task(principal: Principal, action: str) -> None:
    """For what a task's token may not do at all (create stores, workers, tasks; archive, delete)."""
    if principal_task_id(principal) is not None:
        raise PermissionDenied(f"a task's token cannot {action}")


__all__ = [
    "ACCESS_VALUES",
    "MAX_NAMED_STORES",
    "MOUNT_ROOT",
    "Access",
    "Event",
    "MemoryView",
    "StoreView",
    "Task",
    "TaskStore",
    "Tasks",
    "Worker",
    "check_task_access",
    "memory_root",
    "principal_task_id",
    "refuse_task",
    "render_context",
    "slugify",
    "store_access",
    "tasks_for",
    "unique_slugs",
    "visible_store_ids",
]
