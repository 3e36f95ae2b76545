"""Profiles and their memory banks (the profile-bank API).

- A **profile** belongs to one user (a ``user`` credential). Another user's profile is
  :class:`~gitmem.errors.NotFound`, never a permission error, so ids do not leak.
- Each profile has exactly one **bank**: an encrypted store of kind ``bank`` with its own AES-SIV
  data key (owner = the bank's store id). Bank stores are not listed among a workspace's memory stores.
- A bank entry ``projects/acme.md`` is the note ``/projects/acme.md`` of that store, so every rule of
  the engine's ``PROFILE_BANK`` policy (path shape, 100 entries, 64 KiB each, 5 MiB together, path
  collisions, secrets) applies to every way in: this API, the mount, a push.
- Deleting a profile deletes its bank: the repository directory and the data key are destroyed, so
  even a clone taken earlier can no longer be decrypted with anything the server holds.

No HTTP here: ``api/routers/agents/profiles.py`` is a thin shell over :class:`Profiles` and :class:`Bank`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitmem import ids
from gitmem.clock import from_micros
from gitmem.db.migrations import Migration
from gitmem.engine.gitmem import HomeTables
from gitmem.errors import InvalidRequest, LimitExceeded, NotFound, PathConflict, PermissionDenied, PreconditionFailed
from gitmem.model import Actor, Note, StoreInfo
from gitmem.rules import paths
from gitmem.rules.policy import check_store_fields

if TYPE_CHECKING:
    from gitmem.engine.catalog.catalog import Principal
    from gitmem.engine.gitmem import Gitmem
    from gitmem.engine.store.store import MemoryStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS profiles (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, user_id TEXT NOT NULL, name TEXT NOT NULL,
    bank_store_id TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS profiles_user ON profiles (workspace_id, user_id, created_at, id);
"""
MIGRATIONS = (Migration("profiles", 1, SCHEMA),)

MAX_PROFILES_PER_USER = 100
MAX_BANK_LIST = 1000  # more than a bank can hold (100), so one page is always the whole bank


@dataclass(frozen=True)
class Profile:
    id: str
    workspace_id: str
    user_id: str
    name: str
    bank_store_id: str
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass(frozen=True)
class BankEntry:
    """One file of a bank: a relative path (``projects/acme.md``) and, when read, its content."""

    path: str
    size: int
    content_hash: str  # SHA-256 of the plaintext, hex
    created_at: dt.datetime
    updated_at: dt.datetime
    memory_id: str
    version_id: str
    content: str | None = None

    @classmethod
    def of(cls, note: Note) -> BankEntry:
        return cls(
            path=paths.store_to_bank_path(note.path),
            size=note.content_size_bytes,
            content_hash=note.content_sha256,
            created_at=note.created_at,
            updated_at=note.updated_at,
            memory_id=note.id,
            version_id=note.version_id,
            content=note.content,
        )


@dataclass(frozen=True)
class PutResult:
    """What ``PUT`` did: ``created`` on first insert, ``changed`` False for a no-op (no new version)."""

    entry: BankEntry
    created: bool
    changed: bool


def _profile(row: Any) -> Profile:
    return Profile(
        row["id"],
        row["workspace_id"],
        row["user_id"],
        row["name"],
        row["bank_store_id"],
        from_micros(row["created_at"]),
        from_micros(row["updated_at"]),
    )


def require_user(principal: Principal) -> str:
    """The user id of a principal that acts as a user; profiles belong to users only."""
    if principal.actor.type != "user_actor":
        raise PermissionDenied(
            "profiles belong to users: authenticate with a user's token"
            " (gitmem users create), not an API key or a task token"
        )
    return principal.actor.id


def bank_path(path: object) -> str:
    """Check a bank entry's path (relative: ``projects/acme.md``) and give the store's note path."""
    if not isinstance(path, str):
        raise InvalidRequest("path must be a string")
    return paths.bank_to_store_path(path)


class Bank:
    """A profile's memory bank: entries by relative path over the bank's store."""

    def __init__(self, profile: Profile, store: MemoryStore) -> None:
        self.profile = profile
        self.store = store

    @property
    def store_id(self) -> str:
        return self.store.id

    def entries(self) -> list[BankEntry]:
        """Every entry, metadata only, ordered by path."""
        page = self.store.list(limit=MAX_BANK_LIST)
        return [BankEntry.of(n) for n in page.items if isinstance(n, Note)]

    def paths(self) -> list[str]:
        return [e.path for e in self.entries()]

    def totals(self) -> tuple[int, int]:
        """(entries, bytes) now in the bank."""
        self.store.index.catch_up()
        return self.store.index.totals()

    def read(self, path: str) -> BankEntry:
        note_path = bank_path(path)
        try:
            return BankEntry.of(self.store.get_by_path(note_path, with_content=True))
        except NotFound:
            raise NotFound(f"no memory at {path} in profile {self.profile.id}") from None

    def _find(self, note_path: str) -> Note | None:
        try:
            return self.store.get_by_path(note_path, with_content=False)
        except NotFound:
            return None

    def put(self, path: str, content: str, *, actor: Actor | None, expected_hash: str | None = None) -> PutResult:
        """Create or update the entry at ``path``. The same content again is a no-op: no new version.

        ``expected_hash`` (optional) is a precondition: the entry's current content hash, or ``""`` for
        "must not exist yet"; a mismatch is :class:`~gitmem.errors.PreconditionFailed`.
        """
        note_path = bank_path(path)
        if not isinstance(content, str):
            raise InvalidRequest("content must be a string")
        for _attempt in range(3):
            existing = self._find(note_path)
            if existing is None:
                if expected_hash:
                    raise PreconditionFailed(f"there is no memory at {path} (expected content hash {expected_hash})")
                try:
                    note = self.store.create(note_path, content, actor=actor)
                except PathConflict as exc:
                    other = str(exc.details.get("conflicting_path"))
                    if other == note_path:
                        continue  # created concurrently at the same path: update it instead
                    raise PathConflict(
                        f"{path} collides with the entry at {paths.store_to_bank_path(other)}"
                        " (an entry cannot sit at, above or below another one)",
                        conflicting_memory_id=str(exc.details.get("conflicting_memory_id")),
                        conflicting_path=paths.store_to_bank_path(other),
                    ) from None
                return PutResult(BankEntry.of(note), created=True, changed=True)
            if expected_hash == "":
                raise PreconditionFailed(f"a memory exists at {path} already", content_hash=existing.content_sha256)
            try:
                note = self.store.update(
                    existing.id, content=content, expected_sha256=expected_hash or None, actor=actor
                )
            except NotFound:
                continue  # deleted concurrently: create it
            return PutResult(BankEntry.of(note), created=False, changed=note.version_id != existing.version_id)
        raise InvalidRequest(f"{path} kept changing under this write; try again")

    def delete(self, path: str, *, actor: Actor | None, expected_hash: str | None = None) -> BankEntry:
        note_path = bank_path(path)
        existing = self._find(note_path)
        if existing is None:
            raise NotFound(f"no memory at {path} in profile {self.profile.id}")
        self.store.delete(existing.id, expected_sha256=expected_hash or None, actor=actor)
        return BankEntry.of(existing)


class Profiles(HomeTables):
    """Users' profiles on one data home."""

    MIGRATIONS = MIGRATIONS

    def _check_user(self, workspace_id: str, user_id: str) -> None:
        try:
            cred = self.catalog.credential(user_id)
        except NotFound:
            cred = None
        if cred is None or cred.kind != "user" or cred.workspace_id != workspace_id:
            raise NotFound(f"user {user_id} not found")
        if cred.revoked_at is not None:
            raise InvalidRequest(f"user {user_id} is revoked")

    def create(self, workspace_id: str, user_id: str, name: str) -> Profile:
        """A profile of ``user_id`` with an empty, encrypted bank."""
        if not isinstance(name, str):
            raise InvalidRequest("a profile needs a name")
        check_store_fields(name, None, None, filters=self.gm.filters)
        self._check_user(workspace_id, user_id)
        (count,) = self.db.execute(
            "SELECT count(*) FROM profiles WHERE workspace_id=? AND user_id=?", (workspace_id, user_id)
        ).fetchone()
        if count >= MAX_PROFILES_PER_USER:
            raise LimitExceeded(f"a user has at most {MAX_PROFILES_PER_USER} profiles; delete one first")
        profile_id = ids.new_id(ids.PROFILE)
        info = self.gm.create_store(
            workspace_id,
            f"memory bank of {profile_id}",
            description=f"the memory bank of profile {profile_id}",
            metadata={"profile_id": profile_id, "user_id": user_id},
            kind="bank",
            encrypted=True,
        )
        now = self._now()
        try:
            with self.catalog.transaction() as db:
                db.execute(
                    "INSERT INTO profiles VALUES (?,?,?,?,?,?,?)",
                    (profile_id, workspace_id, user_id, name, info.id, now, now),
                )
        except BaseException:
            self.gm.delete_store(workspace_id, info.id, force=True)
            raise
        return self.get(workspace_id, user_id, profile_id)

    def get(self, workspace_id: str, user_id: str, profile_id: str) -> Profile:
        """The profile, if it is this user's (another user's or workspace's is NotFound)."""
        row = self.db.execute(
            "SELECT * FROM profiles WHERE id=? AND workspace_id=? AND user_id=?", (profile_id, workspace_id, user_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"profile {profile_id} not found")
        return _profile(row)

    def get_any(self, profile_id: str) -> Profile:
        """The profile whoever owns it: for operators (the CLI on the server's data home)."""
        row = self.db.execute("SELECT * FROM profiles WHERE id=?", (profile_id,)).fetchone()
        if row is None:
            raise NotFound(f"profile {profile_id} not found")
        return _profile(row)

    def by_bank(self, store_id: str) -> Profile | None:
        row = self.db.execute("SELECT * FROM profiles WHERE bank_store_id=?", (store_id,)).fetchone()
        return _profile(row) if row else None

    def list(self, workspace_id: str, user_id: str | None = None) -> list[Profile]:
        """A user's profiles (or, with no user, every profile of the workspace), oldest first."""
        sql, args = "SELECT * FROM profiles WHERE workspace_id=?", [workspace_id]
        if user_id is not None:
            sql += " AND user_id=?"
            args.append(user_id)
        return [_profile(r) for r in self.db.execute(sql + " ORDER BY created_at, id", args)]

    def rename(self, workspace_id: str, user_id: str, profile_id: str, name: str) -> Profile:
        check_store_fields(name, None, None, filters=self.gm.filters)
        self.get(workspace_id, user_id, profile_id)
        with self.catalog.transaction() as db:
            db.execute("UPDATE profiles SET name=?, updated_at=? WHERE id=?", (name, self._now(), profile_id))
        return self.get(workspace_id, user_id, profile_id)

    def delete(self, workspace_id: str, user_id: str, profile_id: str) -> None:
        """Delete the profile and cascade to its bank: every entry, all history, the data key."""
        self._delete(self.get(workspace_id, user_id, profile_id))

    def delete_any(self, profile_id: str) -> None:
        self._delete(self.get_any(profile_id))

    def _delete(self, profile: Profile) -> None:
        with contextlib.suppress(NotFound):  # NotFound: a half-finished earlier delete removed it already
            self.gm.delete_store(profile.workspace_id, profile.bank_store_id, force=True)
        # The key and the repository are gone whatever happened to the catalog row (belt and braces).
        shutil.rmtree(self.gm.repo_path(profile.bank_store_id), ignore_errors=True)
        self.gm.keyring.destroy(profile.bank_store_id)
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM profiles WHERE id=?", (profile.id,))

    def bank(self, profile: Profile) -> Bank:
        store = self.gm.store(profile.workspace_id, profile.bank_store_id)
        # A key rotation (maybe by another process) retires the key a cached store encrypts with: reopen.
        records = self.gm.keyring.records(profile.bank_store_id)
        if records and getattr(store.codec, "key_id", None) != records[-1].key_id:
            self.gm._forget(profile.bank_store_id)
            store = self.gm.store(profile.workspace_id, profile.bank_store_id)
        return Bank(profile, store)

    def user_bank(self, workspace_id: str, user_id: str, profile_id: str) -> Bank:
        return self.bank(self.get(workspace_id, user_id, profile_id))

    def iter_all(self) -> Iterator[Profile]:
        for row in self.db.execute("SELECT * FROM profiles ORDER BY created_at, id"):
            yield _profile(row)


# -- who may reach a bank through the other surfaces ------------------------------------------------


def check_bank_access(gm: Gitmem, principal: Principal, store_id: str) -> StoreInfo:
    """For the memory-store API and Git's smart HTTP: a bank store is its profile owner's alone.

    Anyone else (an API key, a task, another user of the workspace) gets :class:`NotFound`, exactly as
    for a store of another workspace. Stores that are not banks pass unchanged. Returns the store's
    catalog row, as read for the check."""
    info = gm.get_store(principal.workspace_id, store_id)
    if info.kind != "bank":
        return info
    profile = profiles_for(gm).by_bank(store_id)
    if profile is None or principal.actor != Actor("user_actor", profile.user_id):
        raise NotFound(f"memory store {store_id} not found")
    return info


# -- one Profiles a data home ------------------------------------------------------------------------


def profiles_for(gm: Gitmem) -> Profiles:
    """The :class:`Profiles` of this data home (its table is made on first use)."""
    return Profiles.of(gm)


__all__ = [
    "Bank",
    "BankEntry",
    "Profile",
    "Profiles",
    "PutResult",
    "bank_path",
    "check_bank_access",
    "profiles_for",
    "require_user",
]
