"""The catalog's stores: each store's row (its workspace, name, description, metadata, kind, whether it
is encrypted, when it was made, changed and archived); its notes live in its Git repository."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from typing import Any

from gitmem.clock import from_micros, to_micros
from gitmem.db import Transaction
from gitmem.engine.catalog.base import CatalogBase
from gitmem.engine.catalog.erasures import Erasure
from gitmem.errors import NotFound
from gitmem.model import StoreInfo, StoreKind


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


class StoreRows(CatalogBase):
    """The ``stores`` table."""

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
