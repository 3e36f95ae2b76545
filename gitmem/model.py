"""Domain values: frozen dataclasses the engine returns. Pydantic lives only at the HTTP edge."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

ActorType = Literal["task_actor", "api_actor", "user_actor", "service_account_actor"]
Operation = Literal["created", "modified", "deleted"]
StoreKind = Literal["shared", "worker", "bank"]
Role = Literal["admin", "read-write", "read-only"]

T = TypeVar("T")

_ACTOR_ID_FIELD: dict[str, str] = {
    "task_actor": "task_id",
    "api_actor": "api_key_id",
    "user_actor": "user_id",
    "service_account_actor": "service_account_id",
}


@dataclass(frozen=True)
class Actor:
    """Who made a change. ``None`` in place of an Actor means the service itself."""

    type: ActorType
    id: str

    @property
    def id_field(self) -> str:
        return _ACTOR_ID_FIELD[self.type]

    def trailer(self) -> str:
        """The ``Created-By`` trailer value, e.g. ``task_actor task_id=task_01H...``."""
        return f"{self.type} {self.id_field}={self.id}"

    @classmethod
    def from_trailer(cls, value: str) -> Actor | None:
        value = value.strip()
        if not value or value == "null":
            return None
        kind, _, rest = value.partition(" ")
        if kind not in _ACTOR_ID_FIELD:
            return None
        _, _, actor_id = rest.partition("=")
        return cls(kind, actor_id.strip())  # type: ignore[arg-type]

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, self.id_field: self.id}


# gitmem itself, named where an actor must be named (a redaction made with ``gitmem redact``); the SDK's
# service_account_actor shape. Writes by the service keep ``None`` as their actor.
SERVICE_ACCOUNT = Actor("service_account_actor", "svac_gitmem")


@dataclass(frozen=True)
class Note:
    """A note at a path; ``content`` is ``None`` in the basic view."""

    id: str
    store_id: str
    path: str
    content_sha256: str
    content_size_bytes: int
    blob_id: str
    version_id: str
    created_at: dt.datetime
    updated_at: dt.datetime
    content: str | None = None


@dataclass(frozen=True)
class MemoryPrefix:
    """A folder in a ``depth=1`` listing: a path ending with ``/``."""

    path: str


@dataclass(frozen=True)
class Version:
    id: str
    store_id: str
    memory_id: str
    operation: Operation
    created_at: dt.datetime
    created_by: Actor | None
    path: str | None
    content_sha256: str | None
    content_size_bytes: int | None
    commit_id: str
    content: str | None = None
    redacted_at: dt.datetime | None = None
    redacted_by: Actor | None = None


@dataclass(frozen=True)
class StoreInfo:
    id: str
    workspace_id: str
    name: str
    description: str
    metadata: dict[str, str]
    created_at: dt.datetime
    updated_at: dt.datetime
    archived_at: dt.datetime | None = None
    kind: StoreKind = "shared"
    encrypted: bool = False


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T] = field(default_factory=list)
    next_page: str | None = None
