"""Workers' and tasks' values (frozen), their limits, and the folder names a task sees its stores under
(``/.little-worker/tasks/<task_id>/memory/<store-name-slug>/``). The engine is :mod:`gitmem.agents.tasks.tasks`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from gitmem.model import Actor

if TYPE_CHECKING:
    import datetime as dt


Access = Literal["read_write", "read_only"]
ACCESS_VALUES: tuple[Access, ...] = ("read_write", "read_only")

MAX_NAMED_STORES = 8  # stores a task names in resources, beside its worker's own
MAX_ATTACHED_STORES = 8  # stores attached to a worker (what a task reads when it names none)
MAX_INSTRUCTIONS_CHARS = 4096
MAX_PAGE = 100
MAX_CONTEXT_PATHS = 50  # note paths listed per store in the memory section
MAX_SLUG_CHARS = 80
MAX_EVENT_PAYLOAD_BYTES = 102_400
MOUNT_ROOT = "/.little-worker/tasks"
MAX_INT = 2**63 - 1  # SQLite's integers


@dataclass(frozen=True)
class Worker:
    id: str
    workspace_id: str
    name: str
    own_store_id: str
    attached_store_ids: tuple[str, ...]
    created_at: dt.datetime


@dataclass(frozen=True)
class TaskStore:
    """One store in a task's frozen list, as it was when the task was made."""

    store_id: str
    name: str
    description: str
    access: Access
    instructions: str
    mount_name: str  # the folder's name under the task's memory root
    own: bool  # the worker's own store


@dataclass(frozen=True)
class Task:
    id: str
    workspace_id: str
    worker_id: str
    created_at: dt.datetime
    stores: tuple[TaskStore, ...]  # the worker's own store first, then the named or attached ones
    created_by: Actor | None = None
    ended_at: dt.datetime | None = None  # set once the task is ended: its token no longer works

    @property
    def memory_root(self) -> str:
        return memory_root(self.id)

    def mount_path(self, store: TaskStore) -> str:
        return f"{self.memory_root}{store.mount_name}/"


@dataclass(frozen=True)
class Event:
    id: str
    task_id: str
    seq: int
    type: str
    payload: dict[str, Any]
    created_by: Actor | None
    created_at: dt.datetime


@dataclass(frozen=True)
class StoreView:
    """A task's store as it stands now: its frozen snapshot and the note paths it holds."""

    store: TaskStore
    mount_path: str
    access: Access  # the frozen access, or read_only once the store is archived
    available: bool  # False once the store has been deleted
    archived: bool
    paths: tuple[str, ...]  # up to the cap, e.g. ("/people/sam.md", ...)
    total: int  # notes in the store
    review: str | None = None  # under review: by whom and when, for the section


@dataclass(frozen=True)
class MemoryView:
    task_id: str
    root: str
    stores: tuple[StoreView, ...]
    context: str  # the markdown section for the model's context


def memory_root(task_id: str) -> str:
    return f"{MOUNT_ROOT}/{task_id}/memory/"


def slugify(name: str) -> str:
    """A folder name from a store name: ASCII-folded, lowercase, runs of other characters as one
    hyphen, trimmed (``"Team notes (2026)"`` -> ``team-notes-2026``); ``store`` if nothing is left."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", folded).strip("-")
    return slug[:MAX_SLUG_CHARS].rstrip("-") or "store"


def unique_slugs(names: Iterable[str]) -> list[str]:
    """Slugs for the names in order; a repeat gets ``-2``, ``-3``, ... (never one already taken)."""
    used: set[str] = set()
    out = []
    for name in names:
        base = slugify(name)
        candidate, n = base, 2
        while candidate in used:
            candidate, n = f"{base}-{n}", n + 1
        used.add(candidate)
        out.append(candidate)
    return out


def actor_text(actor: Actor | None) -> str | None:
    return actor.trailer() if actor is not None else None
