"""The catalog's ``dreams`` table (and ``dream_workers``: each workspace's ``dreamer`` worker), and a
row of it read back as a :class:`~gitmem.agents.dreams.values.Dream`. The engine is :mod:`gitmem.agents.dreams.dreams`;
:mod:`gitmem.home_tables` lists these migrations with every other part's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gitmem.agents.dreams.dreamers import Usage
from gitmem.agents.dreams.values import Dream
from gitmem.clock import from_micros
from gitmem.db.migrations import Migration

if TYPE_CHECKING:
    import datetime as dt


SCHEMA = """
CREATE TABLE IF NOT EXISTS dreams (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, status TEXT NOT NULL,
    input_store_id TEXT NOT NULL, tasks_kind TEXT, task_ids TEXT NOT NULL,
    model_id TEXT NOT NULL, model_speed TEXT, instructions TEXT, output_behavior TEXT NOT NULL,
    output_store_id TEXT, task_id TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0, cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
    error_type TEXT, error_message TEXT, created_by TEXT, claimed_by TEXT,
    created_at INTEGER NOT NULL, started_at INTEGER, ended_at INTEGER, archived_at INTEGER);
CREATE INDEX IF NOT EXISTS dreams_workspace ON dreams (workspace_id, created_at, id);
CREATE INDEX IF NOT EXISTS dreams_status ON dreams (status, created_at, id);
CREATE TABLE IF NOT EXISTS dream_workers (workspace_id TEXT PRIMARY KEY, worker_id TEXT NOT NULL);
"""
MIGRATIONS = (Migration("dreams", 1, SCHEMA),)


def _time(micros: int | None) -> dt.datetime | None:
    return from_micros(micros) if micros is not None else None


def dream_from_row(row: Any) -> Dream:
    task_ids = tuple(t for t in row["task_ids"].split("\n") if t)
    usage = Usage(
        row["input_tokens"], row["output_tokens"], row["cache_creation_input_tokens"], row["cache_read_input_tokens"]
    )
    return Dream(
        row["id"],
        row["workspace_id"],
        row["status"],
        row["input_store_id"],
        row["tasks_kind"],
        task_ids,
        row["model_id"],
        row["model_speed"],
        row["instructions"],
        row["output_behavior"],
        row["output_store_id"],
        row["task_id"],
        usage,
        row["error_type"],
        row["error_message"],
        from_micros(row["created_at"]),
        _time(row["started_at"]),
        _time(row["ended_at"]),
        _time(row["archived_at"]),
    )
