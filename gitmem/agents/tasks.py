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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gitmem import ids
from gitmem.clock import from_micros
from gitmem.engine.home import HomeTables
from gitmem.engine.migrations import Migration, add_column, postgres_ddl
from gitmem.errors import (
    ArchivedStore,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    TooLarge,
)
from gitmem.model import Actor, Note, Page, StoreInfo
from gitmem.rules.policy import check_store_fields, check_text

if TYPE_CHECKING:
    from gitmem.engine.home import Gitmem
from gitmem.agents.task_context import render_context
from gitmem.agents.task_model import (
    ACCESS_VALUES,
    MAX_ATTACHED_STORES,
    MAX_CONTEXT_PATHS,
    MAX_EVENT_PAYLOAD_BYTES,
    MAX_INSTRUCTIONS_CHARS,
    MAX_INT,
    MAX_NAMED_STORES,
    MAX_PAGE,
    Access,
    Event,
    MemoryView,
    StoreView,
    Task,
    TaskStore,
    Worker,
    unique_slugs,
)

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


# -- helpers ---------------------------------------------------------------------------------------


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"limit must be between 1 and {MAX_PAGE}")


def _actor_text(actor: Actor | None) -> str | None:
    return actor.trailer() if actor is not None else None


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


# -- one Tasks a data home; the access check the HTTP layer calls ----------------------------------


def tasks_for(gm: Gitmem) -> Tasks:
    """The :class:`Tasks` of this data home (its tables are made on first use)."""
    return Tasks.of(gm)


__all__ = ["Tasks", "tasks_for"]
