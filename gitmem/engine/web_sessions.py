"""Sign-in sessions of the web view (catalog table ``ui_sessions``).

A person gives a key or a user token once; the session keeps the credential's id, never the secret,
and the browser keeps only an opaque session id (stored here as its SHA-256, like every secret).
Every request looks the credential up again, so a revoked key or user is signed out at once, and the
caller is exactly the API's principal, so the API's access rules apply unchanged. Each session has
its own CSRF token for the forms it posts.
"""

from __future__ import annotations

import datetime as dt
import hmac
import secrets
from dataclasses import dataclass

from gitmem.db.migrations import Migration
from gitmem.engine.catalog.catalog import Principal, hash_secret, principal_task_id
from gitmem.engine.gitmem import HomeTables
from gitmem.errors import AuthenticationFailed, PermissionDenied

SESSION_LIFETIME = dt.timedelta(hours=12)


@dataclass(frozen=True)
class WebSession:
    principal: Principal
    csrf_token: str
    name: str  # the key's or user's name, to greet them

    def check_csrf(self, token: str | None) -> None:
        if not token or not hmac.compare_digest(token, self.csrf_token):
            raise PermissionDenied("this form is stale or came from another site; reload the page and retry")


class WebSessions(HomeTables):
    SCHEMA = """
    CREATE TABLE IF NOT EXISTS ui_sessions (
        id_hash TEXT PRIMARY KEY, credential_id TEXT NOT NULL, csrf_token TEXT NOT NULL,
        created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);
    CREATE INDEX IF NOT EXISTS ui_sessions_expiry ON ui_sessions (expires_at);
    """
    MIGRATIONS = (Migration("web_sessions", 1, SCHEMA),)

    def sign_in(self, secret: str) -> str:
        """A new session for a key or user token; returns the session id for the cookie."""
        principal = self.catalog.authenticate(secret)
        if principal_task_id(principal) is not None:
            raise AuthenticationFailed("a task's token cannot sign in to the web view; use a key or a user token")
        session_id = secrets.token_urlsafe(32)
        now = self._now()
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM ui_sessions WHERE expires_at<?", (now,))
            db.execute(
                "INSERT INTO ui_sessions VALUES (?,?,?,?,?)",
                (
                    hash_secret(session_id),
                    principal.credential_id,
                    secrets.token_urlsafe(32),
                    now,
                    now + int(SESSION_LIFETIME.total_seconds() * 1_000_000),
                ),
            )
        return session_id

    def session(self, session_id: str | None) -> WebSession | None:
        """The live session, if the id is known, unexpired and its credential still active."""
        if not session_id:
            return None
        row = self.db.execute(
            "SELECT * FROM ui_sessions WHERE id_hash=? AND expires_at>=?", (hash_secret(session_id), self._now())
        ).fetchone()
        if row is None:
            return None
        principal = self.catalog.principal(row["credential_id"])
        if principal is None:
            return None
        name = self.catalog.credential(principal.credential_id).name
        return WebSession(principal, row["csrf_token"], name)

    def sign_out(self, session_id: str) -> None:
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM ui_sessions WHERE id_hash=?", (hash_secret(session_id),))
