"""The tables of workers, tasks, their frozen store lists and event logs, with the triggers that keep
those lists frozen and the logs append-only (on SQLite and on PostgreSQL). The engine is
:mod:`gitmem.agents.tasks.tasks`; :mod:`gitmem.home_tables` lists these migrations with every other part's.
"""

from __future__ import annotations

from gitmem.db.migrations import Migration, add_column, postgres_ddl

SCHEMA = """
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, name TEXT NOT NULL, own_store_id TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS workers_workspace ON workers (workspace_id, created_at, id);
CREATE TABLE IF NOT EXISTS worker_stores (
    worker_id TEXT NOT NULL REFERENCES workers (id) ON DELETE CASCADE, store_id TEXT NOT NULL,
    position INTEGER NOT NULL, PRIMARY KEY (worker_id, store_id));
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, worker_id TEXT NOT NULL, created_at INTEGER NOT NULL,
    created_by TEXT);
CREATE INDEX IF NOT EXISTS tasks_workspace ON tasks (workspace_id, created_at, id);
CREATE INDEX IF NOT EXISTS tasks_worker ON tasks (worker_id, created_at, id);
CREATE TABLE IF NOT EXISTS task_stores (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE, position INTEGER NOT NULL,
    store_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL, access TEXT NOT NULL,
    instructions TEXT NOT NULL, mount_name TEXT NOT NULL, own INTEGER NOT NULL,
    PRIMARY KEY (task_id, store_id), UNIQUE (task_id, mount_name));
CREATE TABLE IF NOT EXISTS task_events (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, payload TEXT NOT NULL, created_by TEXT,
    created_at INTEGER NOT NULL, PRIMARY KEY (task_id, seq));
"""


SQLITE_GUARDS = """
CREATE TRIGGER IF NOT EXISTS task_stores_frozen_update BEFORE UPDATE ON task_stores
BEGIN SELECT RAISE(ABORT, 'a task''s stores are frozen when the task is made'); END;
CREATE TRIGGER IF NOT EXISTS task_stores_frozen_delete BEFORE DELETE ON task_stores
WHEN EXISTS (SELECT 1 FROM tasks WHERE id = OLD.task_id)
BEGIN SELECT RAISE(ABORT, 'a task''s stores are frozen when the task is made'); END;
CREATE TRIGGER IF NOT EXISTS task_events_append_only_update BEFORE UPDATE ON task_events
BEGIN SELECT RAISE(ABORT, 'task events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS task_events_append_only_delete BEFORE DELETE ON task_events
WHEN EXISTS (SELECT 1 FROM tasks WHERE id = OLD.task_id)
BEGIN SELECT RAISE(ABORT, 'task events are append-only'); END;
"""
# The same guards in PostgreSQL: a trigger runs a function. Both raise an integrity error (SQLSTATE 23000).
POSTGRES_GUARDS = """
CREATE OR REPLACE FUNCTION gitmem_task_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' OR EXISTS (SELECT 1 FROM tasks WHERE id = OLD.task_id) THEN
        RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = '23000';
    END IF;
    RETURN OLD;
END $$;
CREATE OR REPLACE TRIGGER task_stores_frozen BEFORE UPDATE OR DELETE ON task_stores FOR EACH ROW
    EXECUTE FUNCTION gitmem_task_guard('a task''s stores are frozen when the task is made');
CREATE OR REPLACE TRIGGER task_events_append_only BEFORE UPDATE OR DELETE ON task_events FOR EACH ROW
    EXECUTE FUNCTION gitmem_task_guard('task events are append-only');
"""
MIGRATIONS = (
    Migration("tasks", 1, SCHEMA + SQLITE_GUARDS, postgres_ddl(SCHEMA) + POSTGRES_GUARDS),
    # Data homes made before tasks could end.
    Migration(
        "tasks",
        2,
        add_column("tasks", "ended_at", "INTEGER"),
        "ALTER TABLE tasks ADD COLUMN IF NOT EXISTS ended_at BIGINT",
    ),
)
