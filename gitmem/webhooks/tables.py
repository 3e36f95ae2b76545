"""The webhooks' tables and triggers, in SQLite's form and in PostgreSQL's (see :mod:`gitmem.webhooks.outbox`).

The triggers do the same on both engines: a ``webhook_outbox`` row fans out to one delivery a
subscription wanting its type; a store made, archived or deleted and a dream completed or failed write
their outbox row in the very transaction that makes the change. PostgreSQL's triggers run functions;
its event ids come from ``gen_random_uuid()`` where SQLite's come from ``randomblob``: both 32 hex digits.

Also the question every note change asks first, whether the workspace has a subscription to note
events (:func:`wants_note_events`), answered from the catalog alone for a push hook that has not
opened the home.
"""

from __future__ import annotations

from gitmem.db import Database, Transaction
from gitmem.db.migrations import Migration, applied, postgres_ddl

ORGANIZATION_ID = ""  # gitmem has no organizations; the SDK's event data has the field

_NOW_MICROS = "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"
# A catalog event's data, as SQL: the SDK's memory_store.* shape (id, type, workspace_id, organization_id).
_STORE_EVENT = """
CREATE TRIGGER IF NOT EXISTS webhook_store_{name} AFTER {when} ON stores
    WHEN {condition} AND {row}.kind <> 'bank'
         AND EXISTS (SELECT 1 FROM webhooks WHERE workspace_id = {row}.workspace_id)
    BEGIN INSERT INTO webhook_outbox (event_id, event_key, workspace_id, store_id, type, data, created_at)
          VALUES ('evt_' || lower(hex(randomblob(16))), NULL, {row}.workspace_id, {row}.id,
                  'memory_store.{name}',
                  json_object('id', {row}.id, 'type', 'memory_store.{name}', 'workspace_id', {row}.workspace_id,
                              'organization_id', '{org}'),
                  {time}); END;
"""
_DREAM_EVENT = """
CREATE TRIGGER IF NOT EXISTS webhook_dream_ended AFTER UPDATE OF status ON dreams
    WHEN NEW.status IN ('completed', 'failed') AND OLD.status <> NEW.status
         AND EXISTS (SELECT 1 FROM webhooks WHERE workspace_id = NEW.workspace_id)
         AND NOT EXISTS (SELECT 1 FROM stores WHERE kind = 'bank'
                         AND id IN (NEW.input_store_id, coalesce(NEW.output_store_id, '')))
    BEGIN INSERT INTO webhook_outbox (event_id, event_key, workspace_id, store_id, type, data, created_at)
          VALUES ('evt_' || lower(hex(randomblob(16))), NULL, NEW.workspace_id,
                  coalesce(NEW.output_store_id, NEW.input_store_id), 'dream.' || NEW.status,
                  json_object('id', NEW.id, 'type', 'dream.' || NEW.status, 'workspace_id', NEW.workspace_id,
                              'organization_id', '{org}', 'input_memory_store_id', NEW.input_store_id,
                              'output_memory_store_id', NEW.output_store_id, 'error_type', NEW.error_type),
                  coalesce(NEW.ended_at, NEW.created_at)); END;
"""
_DREAM_FAILED_AT_ONCE = _DREAM_EVENT.replace(
    "webhook_dream_ended AFTER UPDATE OF status ON dreams", "webhook_dream_failed_at_once AFTER INSERT ON dreams"
).replace("AND OLD.status <> NEW.status", "")

TABLES = """
CREATE TABLE IF NOT EXISTS webhooks (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, url TEXT NOT NULL, event_types TEXT NOT NULL,
    secret TEXT NOT NULL, description TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS webhooks_workspace ON webhooks (workspace_id, created_at);
CREATE TABLE IF NOT EXISTS webhook_outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE, event_key TEXT UNIQUE,
    workspace_id TEXT NOT NULL, store_id TEXT, type TEXT NOT NULL, data TEXT NOT NULL,
    created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    webhook_id TEXT NOT NULL, seq INTEGER NOT NULL, store_key TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
    first_attempt_at INTEGER, next_attempt_at INTEGER NOT NULL, delivered_at INTEGER, given_up_at INTEGER,
    last_error TEXT, PRIMARY KEY (webhook_id, seq));
CREATE INDEX IF NOT EXISTS webhook_deliveries_pending ON webhook_deliveries (given_up_at, delivered_at, seq);
CREATE INDEX IF NOT EXISTS webhook_deliveries_queue ON webhook_deliveries (webhook_id, store_key, seq)
    WHERE delivered_at IS NULL AND given_up_at IS NULL;
CREATE TABLE IF NOT EXISTS webhook_watermarks (
    store_id TEXT PRIMARY KEY, tip TEXT, landed_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS webhook_lease (
    name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL);
"""
SQLITE_TRIGGERS = f"""
CREATE TRIGGER IF NOT EXISTS webhook_fan_out AFTER INSERT ON webhook_outbox
    BEGIN INSERT INTO webhook_deliveries (webhook_id, seq, store_key, next_attempt_at)
          SELECT w.id, NEW.seq, coalesce(NEW.store_id, ''), 0 FROM webhooks w
          WHERE w.workspace_id = NEW.workspace_id
            AND EXISTS (SELECT 1 FROM json_each(w.event_types) WHERE value = NEW.type); END;
{
    _STORE_EVENT.format(
        name="created", when="INSERT", condition="1", row="NEW", org=ORGANIZATION_ID, time="NEW.created_at"
    )
}
{
    _STORE_EVENT.format(
        name="archived",
        when="UPDATE OF archived_at",
        condition="OLD.archived_at IS NULL AND NEW.archived_at IS NOT NULL",
        row="NEW",
        org=ORGANIZATION_ID,
        time="NEW.archived_at",
    )
}
{_STORE_EVENT.format(name="deleted", when="DELETE", condition="1", row="OLD", org=ORGANIZATION_ID, time=_NOW_MICROS)}
{_DREAM_EVENT.format(org=ORGANIZATION_ID)}
{_DREAM_FAILED_AT_ONCE.format(org=ORGANIZATION_ID)}
"""  # noqa: S608  trigger DDL built from constants


def event_types_of(dialect: str, webhook: str) -> str:
    """A subscription's event types as rows of a column ``t.value`` (they are kept as a JSON list)."""
    if dialect == "sqlite":
        return f"json_each({webhook}.event_types) t"
    return f"json_array_elements_text({webhook}.event_types::json) AS t(value)"


def first_note_subscription(db: Transaction | Database, dialect: str, workspace_id: str) -> int:
    """When the workspace's oldest subscription to note events was made; 0 if it has none."""
    (first,) = db.execute(
        "SELECT min(w.created_at) FROM webhooks w WHERE w.workspace_id=? AND EXISTS (SELECT 1 FROM"  # noqa: S608  built from constants; values bound
        f" {event_types_of(dialect, 'w')}"
        " WHERE t.value LIKE 'memory.%' OR t.value = 'memory_version.redacted')",
        (workspace_id,),
    ).fetchone()
    return int(first or 0)


def wants_note_events(db: Database, workspace_id: str) -> bool:
    """Whether the outbox could write a note event of the workspace (what it asks first of every
    change), read-only and without opening the home: a push hook asks it before telling the outbox.
    A catalog without these tables yet has no subscription (they are made before the first one)."""
    if ("webhooks", 1) not in applied(db):
        return False
    return first_note_subscription(db, db.dialect, workspace_id) != 0


_NEW_EVENT_ID = "'evt_' || replace(gen_random_uuid()::text, '-', '')"
_OUTBOX = "INSERT INTO webhook_outbox (event_id, event_key, workspace_id, store_id, type, data, created_at)"
POSTGRES_TRIGGERS = f"""
CREATE OR REPLACE FUNCTION gitmem_webhook_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (webhook_id, seq, store_key, next_attempt_at)
    SELECT w.id, NEW.seq, coalesce(NEW.store_id, ''), 0 FROM webhooks w
    WHERE w.workspace_id = NEW.workspace_id AND EXISTS (SELECT 1 FROM {event_types_of("postgresql", "w")}
                                                        WHERE t.value = NEW.type);
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER webhook_fan_out AFTER INSERT ON webhook_outbox FOR EACH ROW
    EXECUTE FUNCTION gitmem_webhook_fan_out();

CREATE OR REPLACE FUNCTION gitmem_webhook_store_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r stores%ROWTYPE;
    what text;
    at bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        r := NEW; what := 'created'; at := NEW.created_at;
    ELSIF TG_OP = 'DELETE' THEN
        r := OLD; what := 'deleted'; at := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    ELSIF OLD.archived_at IS NULL AND NEW.archived_at IS NOT NULL THEN
        r := NEW; what := 'archived'; at := NEW.archived_at;
    ELSE
        RETURN NULL;
    END IF;
    IF r.kind <> 'bank' AND EXISTS (SELECT 1 FROM webhooks WHERE workspace_id = r.workspace_id) THEN
        {_OUTBOX}
        VALUES ({_NEW_EVENT_ID}, NULL, r.workspace_id, r.id, 'memory_store.' || what,
                json_build_object('id', r.id, 'type', 'memory_store.' || what, 'workspace_id', r.workspace_id,
                                  'organization_id', '{ORGANIZATION_ID}')::text, at);
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER webhook_store_event AFTER INSERT OR DELETE OR UPDATE OF archived_at ON stores
    FOR EACH ROW EXECUTE FUNCTION gitmem_webhook_store_event();

CREATE OR REPLACE FUNCTION gitmem_webhook_dream_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IN ('completed', 'failed') AND (TG_OP = 'INSERT' OR OLD.status <> NEW.status)
       AND EXISTS (SELECT 1 FROM webhooks WHERE workspace_id = NEW.workspace_id)
       AND NOT EXISTS (SELECT 1 FROM stores WHERE kind = 'bank'
                       AND id IN (NEW.input_store_id, coalesce(NEW.output_store_id, ''))) THEN
        {_OUTBOX}
        VALUES ({_NEW_EVENT_ID}, NULL, NEW.workspace_id, coalesce(NEW.output_store_id, NEW.input_store_id),
                'dream.' || NEW.status,
                json_build_object('id', NEW.id, 'type', 'dream.' || NEW.status, 'workspace_id', NEW.workspace_id,
                                  'organization_id', '{ORGANIZATION_ID}', 'input_memory_store_id', NEW.input_store_id,
                                  'output_memory_store_id', NEW.output_store_id, 'error_type', NEW.error_type)::text,
                coalesce(NEW.ended_at, NEW.created_at));
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER webhook_dream_ended AFTER INSERT OR UPDATE OF status ON dreams
    FOR EACH ROW EXECUTE FUNCTION gitmem_webhook_dream_ended();
"""  # noqa: S608  trigger DDL built from constants

# Version 2: a profile bank (kind 'bank', private to its user) emits no workspace events; SQLite's
# triggers are remade (they are kept by name), PostgreSQL's functions replaced.
_SQLITE_TRIGGER_NAMES = (
    "webhook_fan_out",
    "webhook_store_created",
    "webhook_store_archived",
    "webhook_store_deleted",
    "webhook_dream_ended",
    "webhook_dream_failed_at_once",
)
_REMAKE_SQLITE_TRIGGERS = (
    "".join(f"DROP TRIGGER IF EXISTS {name};\n" for name in _SQLITE_TRIGGER_NAMES) + SQLITE_TRIGGERS
)

MIGRATIONS = (
    Migration("webhooks", 1, TABLES + SQLITE_TRIGGERS, postgres_ddl(TABLES) + POSTGRES_TRIGGERS),
    Migration("webhooks", 2, _REMAKE_SQLITE_TRIGGERS, POSTGRES_TRIGGERS),
)
