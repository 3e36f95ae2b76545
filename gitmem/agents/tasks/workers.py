"""Workers: each has its own store (kind ``worker``: always read-write, never deleted, not counted
among the workspace's shared stores) and a list of attached stores, which its tasks read when they name
none. :class:`~gitmem.agents.tasks.tasks.Tasks` builds on this; use it through ``tasks_for(gm)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gitmem import ids
from gitmem.agents.tasks.tables import MIGRATIONS
from gitmem.agents.tasks.values import MAX_ATTACHED_STORES, MAX_PAGE, Worker
from gitmem.clock import from_micros
from gitmem.engine.gitmem import HomeTables
from gitmem.errors import ArchivedStore, InvalidRequest, LimitExceeded, NotFound
from gitmem.model import Page, StoreInfo
from gitmem.rules.paging import check_limit
from gitmem.rules.policy import check_store_fields


class Workers(HomeTables):
    """Workers of one data home: create, read, list, and the stores attached to each."""

    MIGRATIONS = MIGRATIONS

    def create_worker(self, workspace_id: str, name: str, attached_store_ids: Sequence[str] = ()) -> Worker:
        """A worker with its own store (kind ``worker``) and the given stores attached."""
        if name is None:
            raise InvalidRequest("a worker needs a name")
        check_store_fields(name, None, None, filters=self.gm.filters)
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
        check_limit(limit, MAX_PAGE)
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
