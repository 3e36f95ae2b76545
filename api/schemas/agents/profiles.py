"""Wire shapes of ``/v1/profiles`` and a profile's memory bank (the profile-bank API)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gitmem.api.schemas.common import InModel, OutModel, Timestamp
from gitmem.banks.profiles import BankEntry, Profile, PutResult


class ProfileCreate(InModel):
    name: str = Field(description="1 to 255 characters, no control characters")


class ProfileUpdate(InModel):
    name: str


class ProfileOut(OutModel):
    id: str
    type: Literal["profile"] = "profile"
    name: str
    memory_bank_id: str = Field(description="The id of the profile's bank: an encrypted memory store")
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, profile: Profile) -> ProfileOut:
        return cls(
            id=profile.id,
            name=profile.name,
            memory_bank_id=profile.bank_store_id,
            created_at=profile.created_at,
            updated_at=profile.updated_at,
        )


class ProfileList(OutModel):
    data: list[ProfileOut]
    next_page: str | None = None


class DeletedProfile(OutModel):
    id: str
    type: Literal["profile_deleted"] = "profile_deleted"


class BankMemory(OutModel):
    """An entry's metadata (a listing never carries bodies)."""

    path: str
    size: int
    content_hash: str = Field(description="SHA-256 of the entry's content, hex")
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, entry: BankEntry) -> BankMemory:
        return cls(
            path=entry.path,
            size=entry.size,
            content_hash=entry.content_hash,
            created_at=entry.created_at,
            updated_at=entry.updated_at,
        )


class BankMemoryList(OutModel):
    memories: list[BankMemory]


class BankMemoryContent(BankMemory):
    content: str

    @classmethod
    def of(cls, entry: BankEntry) -> BankMemoryContent:
        assert entry.content is not None  # noqa: S101  narrows the type for mypy; never a check of input
        return cls(
            path=entry.path,
            content=entry.content,
            size=entry.size,
            content_hash=entry.content_hash,
            created_at=entry.created_at,
            updated_at=entry.updated_at,
        )


class BankMemoryPut(InModel):
    content: str = Field(description="The entry's markdown, at most 64 KiB of UTF-8")


class BankMemoryWritten(BankMemory):
    created: bool = Field(description="True on first insert")
    changed: bool = Field(description="False when the content matched the entry: a no-op, no new version")

    @classmethod
    def of(cls, result: PutResult) -> BankMemoryWritten:  # type: ignore[override]
        e = result.entry
        return cls(
            path=e.path,
            size=e.size,
            content_hash=e.content_hash,
            created_at=e.created_at,
            updated_at=e.updated_at,
            created=result.created,
            changed=result.changed,
        )


class BankMemoryDeleted(OutModel):
    path: str
    deleted: Literal[True] = True
