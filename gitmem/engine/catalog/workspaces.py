"""The catalog's workspaces: each one a name, and the settings a workspace keeps (its retention, its
webhooks' switches)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from gitmem import ids
from gitmem.clock import from_micros
from gitmem.db import integrity_errors
from gitmem.engine.catalog.base import CatalogBase
from gitmem.errors import InvalidRequest, NotFound


@dataclass(frozen=True)
class Workspace:
    id: str
    name: str
    created_at: dt.datetime
    settings: dict[str, object]


class WorkspaceRows(CatalogBase):
    """The ``workspaces`` table."""

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
