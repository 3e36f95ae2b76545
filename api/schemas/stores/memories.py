"""Memories on the wire (``/v1/memory_stores/{id}/memories``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gitmem.api.schemas.common import (
    InModel,
    NoteContent,
    NotePath,
    OutModel,
    Sha256Hex,
    Timestamp,
    View,
)
from gitmem.model import MemoryPrefix, Note


class Memory(OutModel):
    id: str
    type: Literal["memory"] = "memory"
    memory_store_id: str
    path: str
    content: str | None = None
    content_sha256: str
    content_size_bytes: int
    memory_version_id: str
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, note: Note, view: View) -> Memory:
        return cls(
            id=note.id,
            memory_store_id=note.store_id,
            path=note.path,
            content=note.content if view == "full" else None,
            content_sha256=note.content_sha256,
            content_size_bytes=note.content_size_bytes,
            memory_version_id=note.version_id,
            created_at=note.created_at,
            updated_at=note.updated_at,
        )


class MemoryPrefixOut(OutModel):
    type: Literal["memory_prefix"] = "memory_prefix"
    path: str


MemoryListItem = Annotated[Memory | MemoryPrefixOut, Field(discriminator="type")]


def memory_item(item: Note | MemoryPrefix, view: View) -> Memory | MemoryPrefixOut:
    if isinstance(item, MemoryPrefix):
        return MemoryPrefixOut(path=item.path)
    return Memory.of(item, view)


class MemoryList(OutModel):
    data: list[MemoryListItem]
    next_page: str | None = None


class DeletedMemory(OutModel):
    id: str
    type: Literal["memory_deleted"] = "memory_deleted"


class Precondition(InModel):
    type: Literal["content_sha256"]
    content_sha256: Sha256Hex


class MemoryCreate(InModel):
    path: NotePath
    # The SDK sends ``content`` always and types it nullable: ``null`` makes an empty note, like "".
    content: NoteContent | None


class MemoryUpdate(InModel):
    # ``null`` or absent: leave as is.
    content: NoteContent | None = None
    path: NotePath | None = None
    precondition: Precondition | None = None


# -- memory versions -------------------------------------------------------------------------------
