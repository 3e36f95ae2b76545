"""Memory versions on the wire (``/v1/memory_stores/{id}/memory_versions``)."""

from __future__ import annotations

from typing import Literal

from gitmem.api.schemas.common import (
    Operation,
    OutModel,
    Timestamp,
    View,
    WireActor,
    actor_out,
)
from gitmem.model import Version


class MemoryVersion(OutModel):
    id: str
    type: Literal["memory_version"] = "memory_version"
    memory_store_id: str
    memory_id: str
    operation: Operation
    path: str | None = None
    content: str | None = None
    content_sha256: str | None = None
    content_size_bytes: int | None = None
    created_at: Timestamp
    created_by: WireActor | None = None
    redacted_at: Timestamp | None = None
    redacted_by: WireActor | None = None

    @classmethod
    def of(cls, version: Version, view: View) -> MemoryVersion:
        redacted = version.redacted_at is not None
        return cls(
            id=version.id,
            memory_store_id=version.store_id,
            memory_id=version.memory_id,
            operation=version.operation,
            path=None if redacted else version.path,
            content=version.content if view == "full" and not redacted else None,
            content_sha256=None if redacted else version.content_sha256,
            content_size_bytes=None if redacted else version.content_size_bytes,
            created_at=version.created_at,
            created_by=actor_out(version.created_by),
            redacted_at=version.redacted_at,
            redacted_by=actor_out(version.redacted_by),
        )


class MemoryVersionList(OutModel):
    data: list[MemoryVersion]
    next_page: str | None = None


# -- health ----------------------------------------------------------------------------------------
