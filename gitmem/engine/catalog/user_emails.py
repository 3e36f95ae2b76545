"""The Git e-mail addresses a person commits with (catalog table ``user_emails``).

A user registers the addresses of their own ``git config user.email``; a pushed commit whose author
and committer carry one of them is theirs (:mod:`gitmem.engine.push.check`), so an ordinary clone
pushes without a special identity. An address belongs to at most one user of a workspace: the first to
register it, until they or an admin remove it. The rule is per workspace because a workspace is whose
history a commit joins: the same person may be a user of two workspaces and register the same address
in each, and one tenant can neither squat another's addresses nor learn that they exist.

An address stays registered when its user is revoked: their commits carry it, and a newcomer taking it
would make the history read as theirs. Addresses are compared in lower case, as the push check does.
The domains gitmem writes itself (``*.gitmem``, ``gitmem@localhost``) cannot be registered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitmem.clock import to_micros
from gitmem.db import integrity_errors
from gitmem.db.migrations import Migration
from gitmem.engine.catalog.catalog import Catalog, Credential
from gitmem.errors import Conflict, InvalidRequest, NotFound

MAX_EMAILS_PER_USER = 20
MAX_EMAIL_LENGTH = 254  # RFC 5321's limit on a forward path
# What Git accepts between < and > and a mail system would route: one @, no spaces or angle brackets.
_EMAIL = re.compile(r"^[^\s<>@,;:\"]+@[^\s<>@,;:\"]+\.[^\s<>@,;:\".]+$")
_RESERVED = ("gitmem@localhost",)
_RESERVED_DOMAIN = ".gitmem"


@dataclass(frozen=True)
class UserEmail:
    email: str
    user_id: str


def normalize(email: str) -> str:
    """``email`` as it is stored and compared, or :class:`InvalidRequest` saying what is wrong."""
    text = email.strip().lower()
    if not text:
        raise InvalidRequest("email: give the address you commit with (git config user.email)")
    if len(text) > MAX_EMAIL_LENGTH:
        raise InvalidRequest(f"email: at most {MAX_EMAIL_LENGTH} characters")
    if not _EMAIL.match(text):
        raise InvalidRequest("email: not an address of the form name@example.com")
    if text in _RESERVED or text.endswith(_RESERVED_DOMAIN):
        raise InvalidRequest("email: addresses of gitmem's own domains are given by gitmem, not registered")
    return text


class UserEmails:
    """The addresses of a catalog's users; its table made on first use."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS user_emails (
        workspace_id TEXT NOT NULL, email TEXT NOT NULL, user_id TEXT NOT NULL, created_at INTEGER NOT NULL,
        PRIMARY KEY (workspace_id, email));
    CREATE INDEX IF NOT EXISTS user_emails_user ON user_emails (user_id, email);
    """
    MIGRATIONS = (Migration("user_emails", 1, SCHEMA),)

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        catalog.ensure_schema(self.MIGRATIONS)

    def _user(self, user_id: str) -> Credential:
        try:
            user = self.catalog.credential(user_id)
        except NotFound:
            user = None
        if user is None or user.kind != "user":
            raise NotFound(f"user {user_id} not found")
        return user

    def of_user(self, user_id: str) -> list[str]:
        """The user's addresses, oldest first (the first is the one ``gitmem clone`` configures)."""
        rows = self.catalog.db.execute(
            "SELECT email FROM user_emails WHERE user_id=? ORDER BY created_at, email", (user_id,)
        ).fetchall()
        return [row["email"] for row in rows]

    def owner(self, workspace_id: str, email: str) -> str | None:
        """The user of ``workspace_id`` who registered ``email`` (any spelling), if any."""
        row = self.catalog.db.execute(
            "SELECT user_id FROM user_emails WHERE workspace_id=? AND email=?", (workspace_id, email.strip().lower())
        ).fetchone()
        return row["user_id"] if row is not None else None

    def add(self, user_id: str, email: str) -> UserEmail:
        """Register ``email`` as ``user_id``'s. Registering one's own address again changes nothing;
        an address another user of the workspace registered is a :class:`Conflict`."""
        address = normalize(email)
        user = self._user(user_id)
        if user.revoked_at is not None:
            raise InvalidRequest(f"user {user_id} is revoked")
        with self.catalog.transaction() as db:
            row = db.execute(
                "SELECT user_id FROM user_emails WHERE workspace_id=? AND email=?", (user.workspace_id, address)
            ).fetchone()
            if row is not None:
                if row["user_id"] == user_id:
                    return UserEmail(address, user_id)
                raise Conflict(f"{address} is registered by another user of this workspace")
            count = db.execute("SELECT count(*) FROM user_emails WHERE user_id=?", (user_id,)).fetchone()[0]
            if count >= MAX_EMAILS_PER_USER:
                raise InvalidRequest(f"a user may register at most {MAX_EMAILS_PER_USER} addresses")
            try:
                db.execute(
                    "INSERT INTO user_emails VALUES (?,?,?,?)",
                    (user.workspace_id, address, user_id, to_micros(self.catalog.clock())),
                )
            except integrity_errors():  # the catalog's lock makes this unreachable; kept as the rule's guard
                raise Conflict(f"{address} is registered by another user of this workspace") from None
        return UserEmail(address, user_id)

    def remove(self, user_id: str, email: str) -> None:
        """Unregister one of ``user_id``'s addresses (:class:`NotFound` if it is not theirs)."""
        address = email.strip().lower()
        self._user(user_id)
        with self.catalog.transaction() as db:
            removed = db.execute("DELETE FROM user_emails WHERE user_id=? AND email=?", (user_id, address)).rowcount
        if not removed:
            raise NotFound(f"{address} is not an address of user {user_id}")
