"""Webhook subscriptions and the event outbox, in the catalog.

A subscription (``whk_...``) is a URL, the event types it wants, and a ``whsec_...`` signing secret
(shown once, when it is made; kept in the catalog because every delivery is signed with it).

**The outbox.** Every event is one ``webhook_outbox`` row; a trigger on that table fans it out, in the
same transaction, to one ``webhook_deliveries`` row per subscription of its workspace that wants its
type. Delivery (:mod:`gitmem.webhooks.delivery`) works only from those rows, so an event is never lost
once its row is committed, across crashes and restarts.

**Changes that live in the catalog** (stores made, archived, deleted; dreams completed or failed) are
reported by SQLite triggers on the ``stores`` and ``dreams`` tables: the outbox row is written in the
very transaction that makes the change, whichever process or code path makes it.

**Note changes live in Git**, so no transaction covers both the commit and the outbox row. At least
once is kept this way: right after a commit lands, the writer calls :meth:`Webhooks.notes_changed`,
which, in one catalog transaction, reads the store's versions since the store's watermark (a version's
``created_at``, when it landed) and writes an outbox row per new version (keyed by the version id, so
a version seen twice is one event), then moves the watermark. If the process dies between the commit
and that transaction, nothing is lost: :meth:`Webhooks.catch_up` (run by the delivery worker at start
and periodically) does the same scan for every store whose ``main`` has moved since its watermark, so
pushes, dreams and a crashed writer's versions are all reported. Scans run inside ``BEGIN IMMEDIATE``,
one at a time, so events of a store enter the outbox in commit order (the order they are delivered).
Versions made before a workspace's first subscription are not reported.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pygit2

from gitmem import ids
from gitmem.clock import from_micros, iso, to_micros
from gitmem.db import Database, Transaction
from gitmem.engine.gitmem import Gitmem, HomeTables
from gitmem.engine.store.conflicts import Conflict
from gitmem.engine.store.store import MAX_VERSIONS_PAGE, MemoryStore
from gitmem.errors import InvalidRequest, NotFound
from gitmem.git.repository import read_tip
from gitmem.model import Version
from gitmem.webhooks.tables import MIGRATIONS, ORGANIZATION_ID, first_note_subscription
from gitmem.webhooks.targets import Networks, check_registration

log = logging.getLogger(__name__)

STORE_EVENTS = ("memory_store.created", "memory_store.archived", "memory_store.deleted")
NOTE_EVENTS = ("memory.created", "memory.modified", "memory.deleted")
EVENT_TYPES = (
    *STORE_EVENTS,
    *NOTE_EVENTS,
    "memory_version.redacted",
    "memory.conflict",
    "dream.completed",
    "dream.failed",
)
MAX_WEBHOOKS = 20  # subscriptions a workspace keeps
SUBSCRIPTIONS = "webhooks"  # the catalog change announced when a workspace's subscriptions change
SECRET_PREFIX = "whsec_"  # noqa: S105  the prefix of a secret, not one
WEBHOOK_PREFIX = "whk"
EVENT_PREFIX = "evt"


@dataclass(frozen=True)
class Webhook:
    id: str
    workspace_id: str
    url: str
    event_types: tuple[str, ...]
    description: str
    created_at: dt.datetime
    secret: str | None = None  # only on the value :meth:`Webhooks.create` returns


def new_secret() -> str:
    """``whsec_`` + base64 of 32 random bytes: the Standard Webhooks form of a signing key."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _webhook(row: Any) -> Webhook:
    return Webhook(
        row["id"],
        row["workspace_id"],
        row["url"],
        tuple(json.loads(row["event_types"])),
        row["description"],
        from_micros(row["created_at"]),
    )


def _check_subscription(url: str, event_types: Sequence[str], allow: Networks) -> tuple[str, ...]:
    check_registration(url, allow)
    if isinstance(event_types, str) or not event_types:
        raise InvalidRequest("event_types must be a non-empty list")
    unknown = sorted(set(event_types) - set(EVENT_TYPES))
    if unknown:
        raise InvalidRequest(f"unknown event types {', '.join(unknown)}; known: {', '.join(EVENT_TYPES)}")
    return tuple(t for t in EVENT_TYPES if t in set(event_types))


class Webhooks(HomeTables):
    MIGRATIONS = MIGRATIONS

    def __init__(self, gm: Gitmem) -> None:
        from gitmem.agents.dreams.tables import MIGRATIONS as DREAMS

        gm.catalog.ensure_schema(DREAMS)  # the dreams table must exist before the trigger on it
        super().__init__(gm)

    # -- subscriptions ----------------------------------------------------------------------------

    def create(
        self,
        workspace_id: str,
        url: str,
        event_types: Sequence[str],
        description: str = "",
        *,
        allow_networks: Networks = (),
    ) -> Webhook:
        """A subscription; the returned value carries its secret, which is never shown again. The URL
        is refused if malformed or if it names an address a delivery may not reach (beyond
        ``allow_networks``, the deployment's ``GITMEM_WEBHOOK_ALLOW_NETWORKS``)."""
        types = _check_subscription(url, event_types, allow_networks)
        if len(description) > 1024:
            raise InvalidRequest("description is at most 1024 characters")
        self.gm.filters.check_caller_text("the description", description)
        webhook_id, secret, now = ids.new_id(WEBHOOK_PREFIX), new_secret(), self._now()
        with self.catalog.transaction() as db:
            (count,) = db.execute("SELECT count(*) FROM webhooks WHERE workspace_id=?", (workspace_id,)).fetchone()
            if count >= MAX_WEBHOOKS:
                raise InvalidRequest(f"a workspace keeps at most {MAX_WEBHOOKS} webhooks")
            db.execute(
                "INSERT INTO webhooks VALUES (?,?,?,?,?,?,?)",
                (webhook_id, workspace_id, url, json.dumps(types), secret, description, now),
            )
            self.catalog.changed(db, SUBSCRIPTIONS, workspace_id)
        return dataclasses.replace(self.get(workspace_id, webhook_id), secret=secret)

    def get(self, workspace_id: str, webhook_id: str) -> Webhook:
        row = self.db.execute(
            "SELECT * FROM webhooks WHERE id=? AND workspace_id=?", (webhook_id, workspace_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"webhook {webhook_id} not found")
        return _webhook(row)

    def subscriptions(self, workspace_id: str) -> list[Webhook]:
        rows = self.db.execute("SELECT * FROM webhooks WHERE workspace_id=? ORDER BY created_at, id", (workspace_id,))
        return [_webhook(r) for r in rows]

    def delete(self, workspace_id: str, webhook_id: str) -> None:
        """The subscription and its undelivered events go; other subscriptions keep theirs."""
        self.get(workspace_id, webhook_id)
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM webhook_deliveries WHERE webhook_id=?", (webhook_id,))
            db.execute("DELETE FROM webhooks WHERE id=?", (webhook_id,))
            self.catalog.changed(db, SUBSCRIPTIONS, workspace_id)
            if not self._first_subscription(db, workspace_id):
                # Nobody listens to notes any more: a later subscription starts from its own time.
                db.execute(
                    "DELETE FROM webhook_watermarks WHERE store_id IN (SELECT id FROM stores WHERE workspace_id=?)",
                    (workspace_id,),
                )

    # -- note events ------------------------------------------------------------------------------

    def _wants_note_events(self, workspace_id: str) -> bool:
        """Asked after every write: kept between writes where the catalog announces every change."""
        return self.catalog.cache.get(
            SUBSCRIPTIONS, workspace_id, lambda: bool(self._first_subscription(self.db, workspace_id))
        )

    def _is_bank(self, store_id: str) -> bool:
        """A profile bank is its user's alone: none of its changes is a workspace event (the admin's
        webhooks would learn of what every other surface hides from the admin)."""
        try:
            return self.catalog.store(store_id).kind == "bank"
        except NotFound:
            return False

    def notes_changed(self, store: MemoryStore, workspace_id: str) -> int:
        """Write an outbox row for every version of ``store`` since its watermark; the number written.

        Called right after a commit lands and by :meth:`catch_up`. Cheap when nobody listens: one query.
        """
        if not self._wants_note_events(workspace_id) or self._is_bank(store.id):
            return 0
        tip = str(store.index.catch_up() or "")
        written = 0
        with self.catalog.transaction() as db:
            mark = db.execute("SELECT tip, landed_at FROM webhook_watermarks WHERE store_id=?", (store.id,)).fetchone()
            if mark is not None and mark["tip"] == tip:
                return 0
            since = mark["landed_at"] if mark is not None else self._first_subscription(db, workspace_id)
            newest = since
            # An encrypted store's paths are secret at rest: its events name notes by id only.
            show_path = not self.catalog.store(store.id).encrypted
            for version in self._versions_since(store, since):
                newest = max(newest, to_micros(version.created_at))
                written += self._insert_note_event(db, workspace_id, version, show_path)
            db.execute(
                "INSERT INTO webhook_watermarks VALUES (?,?,?) ON CONFLICT (store_id) DO UPDATE"
                " SET tip=excluded.tip, landed_at=excluded.landed_at",
                (store.id, tip, newest),
            )
        return written

    def _first_subscription(self, db: Transaction | Database, workspace_id: str) -> int:
        """When the workspace's oldest subscription to note events was made; 0 if it has none."""
        return first_note_subscription(db, self.db.dialect, workspace_id)

    @staticmethod
    def _versions_since(store: MemoryStore, since_micros: int) -> list[Version]:
        """Versions landed at or after ``since`` (the same instant may hold more), oldest first."""
        found: list[Version] = []
        page: str | None = None
        while True:
            result = store.versions(created_gte=from_micros(since_micros), limit=MAX_VERSIONS_PAGE, page=page)
            found.extend(result.items)
            page = result.next_page
            if not page:
                return found[::-1]

    def _insert_note_event(self, db: Transaction, workspace_id: str, version: Version, show_path: bool) -> int:
        event_type = f"memory.{version.operation}"
        data = {
            "id": version.memory_id,
            "type": event_type,
            "workspace_id": workspace_id,
            "organization_id": ORGANIZATION_ID,
            "memory_store_id": version.store_id,
            "memory_version_id": version.id,
            "path": version.path if show_path else None,
            "created_by": version.created_by.as_dict() if version.created_by else None,
        }
        return self._insert(
            db, workspace_id, version.store_id, event_type, data, version.id, to_micros(version.created_at)
        )

    def version_redacted(self, store: MemoryStore, workspace_id: str, version: Version) -> None:
        """Called right after a redaction commits: the ``memory_version.redacted`` event."""
        if not self._wants_note_events(workspace_id) or self._is_bank(store.id):
            return
        data = {
            "id": version.id,
            "type": "memory_version.redacted",
            "workspace_id": workspace_id,
            "organization_id": ORGANIZATION_ID,
            "memory_store_id": store.id,
            "memory_id": version.memory_id,
        }
        with self.catalog.transaction() as db:
            self._insert(
                db, workspace_id, store.id, "memory_version.redacted", data, f"redacted:{version.id}", self._now()
            )

    def conflict_kept(self, store: MemoryStore, workspace_id: str, conflict: Conflict) -> None:
        """Called right after a conflict is kept: the ``memory.conflict`` event (the conflict without its text)."""
        if not self._wants_note_events(workspace_id) or self._is_bank(store.id):
            return
        data = {
            "id": conflict.id,
            "type": "memory.conflict",
            "workspace_id": workspace_id,
            "organization_id": ORGANIZATION_ID,
            "memory_store_id": store.id,
            "memory_id": conflict.memory_id,
            "operation": conflict.operation,
            "path": None if self.catalog.store(store.id).encrypted else conflict.path,  # as note events
            "content_sha256": conflict.content_sha256,
            "winner_version_id": conflict.winner_version_id,
            "created_by": conflict.created_by.as_dict() if conflict.created_by else None,
            "created_at": iso(conflict.created_at),
        }
        with self.catalog.transaction() as db:
            self._insert(db, workspace_id, store.id, "memory.conflict", data, f"conflict:{conflict.id}", self._now())

    @staticmethod
    def _insert(
        db: Transaction,
        workspace_id: str,
        store_id: str,
        event_type: str,
        data: dict[str, Any],
        key: str,
        created_at: int,
    ) -> int:
        return db.execute(
            "INSERT INTO webhook_outbox (event_id, event_key, workspace_id, store_id, type, data, created_at)"
            " VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
            (ids.new_id(EVENT_PREFIX), key, workspace_id, store_id, event_type, json.dumps(data), created_at),
        ).rowcount

    def catch_up(self) -> int:
        """Report versions no writer reported (a crash after its commit, a push, another process):
        every store of a workspace that listens whose ``main`` moved since its watermark."""
        written = 0
        workspaces = [r[0] for r in self.db.execute("SELECT DISTINCT workspace_id FROM webhooks")]
        for workspace_id in workspaces:
            if not self._wants_note_events(workspace_id):
                continue
            marks = dict(
                self.db.execute(
                    "SELECT s.id, m.tip FROM stores s LEFT JOIN webhook_watermarks m ON m.store_id = s.id"
                    " WHERE s.workspace_id=? AND s.kind <> 'bank'",
                    (workspace_id,),
                ).fetchall()
            )
            for store_id, tip in marks.items():
                try:
                    if tip is not None and tip == self._tip_of(store_id):
                        continue
                    with self.gm.leases():  # the scan visits every store: each returned as it goes
                        written += self.notes_changed(self.gm.store(workspace_id, store_id), workspace_id)
                except (NotFound, pygit2.GitError):
                    continue  # deleted in between
        return written

    def _tip_of(self, store_id: str) -> str:
        """``main``'s commit, read from the ref alone: no index opened, nothing cached."""
        return str(read_tip(pygit2.Repository(str(self.gm.repo_path(store_id)))) or "")


def webhooks_for(gm: Gitmem) -> Webhooks:
    return Webhooks.of(gm)
