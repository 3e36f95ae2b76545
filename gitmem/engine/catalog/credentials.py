"""The catalog's credentials: API keys, users' tokens and tasks' tokens, stored as SHA-256 digests
(they are long random strings, so a fast hash is enough) and shown once; who a secret stands for
(:class:`Principal`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitmem import ids
from gitmem.clock import from_micros
from gitmem.engine.catalog.base import CatalogBase, CatalogBusy
from gitmem.errors import AuthenticationFailed, InvalidRequest, NotFound
from gitmem.model import Actor, Role

if TYPE_CHECKING:
    from gitmem.engine.catalog.workspaces import Workspace

ROLES: tuple[Role, ...] = ("admin", "read-write", "read-only")
_SECRET_PREFIX = {"api_key": "gm_key_", "user": "gm_usr_", "task": "gm_tsk_"}


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


def principal_task_id(principal: Principal) -> str | None:
    """The task a principal acts for (a task token), else ``None``."""
    if principal.task_id:
        return principal.task_id
    return principal.actor.id if principal.actor.type == "task_actor" else None


class CredentialRows(CatalogBase):
    """The ``credentials`` table: making, listing and revoking them, and authenticating a secret."""

    if TYPE_CHECKING:  # WorkspaceRows's, beside this in the Catalog

        def workspace(self, workspace_id: str) -> Workspace: ...

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
