"""Workers and tasks: which stores a task reads (the memory-store API).

- A **worker** has its own store (kind ``worker``: always read-write, never deleted, not counted
  among the workspace's shared stores) and a list of attached stores (:mod:`gitmem.agents.tasks.workers`).
- A **task** belongs to a worker. It reads its worker's own store (read-write) plus up to 8 stores
  named in ``resources``, or, with none named, the stores attached to its worker. The list is frozen
  when the task is made: each store's name, description, access, instructions and folder name are
  kept in ``task_stores`` (guarded by triggers), so a later rename never reaches a running task.
- A task gets a token (a ``task`` credential whose id is the task's id): its writes are
  ``task_actor`` versions, and :func:`check_task_access` confines it to its frozen list.
- A task sees each store as ``/.little-worker/tasks/<task_id>/memory/<store-name-slug>/`` and gets a
  short markdown section for its context (:meth:`Tasks.memory_view`).
- Each task has an append-only event log (:mod:`gitmem.agents.tasks.events`).
- A task ends (:meth:`Tasks.end_task`): its token is revoked in the shared catalog, so it stops working
  at once in every server process; its writes and events stay. A deleted task
  (:meth:`Tasks.delete_task`) is gone with its events and token; its versions keep its id as history.

The tables and their triggers are in :mod:`gitmem.agents.tasks.tables`; values and limits in
:mod:`gitmem.agents.tasks.values`. No HTTP here: ``api/routers/agents/workers.py`` and
``api/routers/agents/tasks.py`` are thin shells over this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gitmem import ids
from gitmem.agents.tasks.context import render_context
from gitmem.agents.tasks.events import TaskEvents
from gitmem.agents.tasks.tables import MIGRATIONS
from gitmem.agents.tasks.values import (
    ACCESS_VALUES,
    MAX_CONTEXT_PATHS,
    MAX_INSTRUCTIONS_CHARS,
    MAX_NAMED_STORES,
    MAX_PAGE,
    Access,
    MemoryView,
    StoreView,
    Task,
    TaskStore,
    actor_text,
    unique_slugs,
)
from gitmem.agents.tasks.workers import Workers
from gitmem.clock import from_micros
from gitmem.errors import InvalidRequest, LimitExceeded, NotFound
from gitmem.model import Actor, Note, Page, StoreInfo
from gitmem.rules.paging import check_limit

if TYPE_CHECKING:
    from gitmem.engine.gitmem import Gitmem


class Tasks(Workers, TaskEvents):
    """Workers (:class:`~gitmem.agents.tasks.workers.Workers`), tasks, their frozen store lists, memory views
    and event logs (:class:`~gitmem.agents.tasks.events.TaskEvents`) on one data home."""

    MIGRATIONS = MIGRATIONS

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
                (task_id, workspace_id, worker_id, self._now(), actor_text(created_by)),
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
            self.gm.filters.check_caller_text(f"{where}.instructions", instructions)
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
        check_limit(limit, MAX_PAGE)
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
        from gitmem.agents.review.review import Reviews  # review builds on tasks

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


def tasks_for(gm: Gitmem) -> Tasks:
    """The :class:`Tasks` of this data home (its tables are made on first use)."""
    return Tasks.of(gm)


__all__ = ["Tasks", "tasks_for"]
