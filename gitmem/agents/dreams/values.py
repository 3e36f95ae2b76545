"""A dream as a value: its statuses, its output behaviours, its limits and the frozen :class:`Dream`.
The engine that makes, claims and runs dreams is :mod:`gitmem.agents.dreams.dreams`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from gitmem.agents.dreams.dreamers import (
    Usage,
)

if TYPE_CHECKING:
    import datetime as dt


Status = Literal["pending", "running", "completed", "failed", "canceled"]
STATUSES: tuple[Status, ...] = ("pending", "running", "completed", "failed", "canceled")
FINAL: frozenset[str] = frozenset({"completed", "failed", "canceled"})
OutputBehavior = Literal["create_new", "update_existing"]

MAX_INPUT_BYTES = 10 * 1024 * 1024  # 10 MiB of notes in the input store
MAX_TASKS = 100
MAX_INSTRUCTIONS_CHARS = 4096
MAX_MODEL_ID_CHARS = 256
MAX_PAGE = 100
MAX_EVENTS_A_TASK = 10_000
DEFAULT_TIMEOUT_SECONDS = 12 * 3600.0
DREAMER_WORKER_NAME = "dreamer"
MAX_STORE_NAME = 255


@dataclass(frozen=True)
class Dream:
    id: str
    workspace_id: str
    status: Status
    input_store_id: str
    tasks_kind: str | None  # "sessions" or "tasks", as the request named them; None without tasks
    task_ids: tuple[str, ...]  # sorted
    model_id: str
    model_speed: str | None
    instructions: str | None
    output_behavior: OutputBehavior
    output_store_id: str | None
    task_id: str | None
    usage: Usage
    error_type: str | None
    error_message: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    archived_at: dt.datetime | None
