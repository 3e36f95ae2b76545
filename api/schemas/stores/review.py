"""The review's wire shapes (gitmem's own routes; the SDK has none)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gitmem.agents.review.review import PendingChange, ReviewMark
from gitmem.api.schemas.common import InModel, OutModel, Timestamp, WireActor, actor_out
from gitmem.api.schemas.stores.memory_versions import MemoryVersion
from gitmem.api.schemas.stores.search import MemoryVersionDiff


class ReviewMarkOut(OutModel):
    """Where the review mark stands: approved through ``version_id`` (null: nothing was written yet)."""

    type: Literal["review_mark"] = "review_mark"
    action: str
    version_id: str | None
    reviewed_by: WireActor | None
    reviewed_at: Timestamp
    record_id: str = Field(description="The review record's commit on refs/reviews/main")

    @classmethod
    def of(cls, mark: ReviewMark) -> ReviewMarkOut:
        return cls(
            action=mark.action,
            version_id=mark.version_id,
            reviewed_by=actor_out(mark.reviewed_by),
            reviewed_at=mark.reviewed_at,
            record_id=mark.record_id,
        )


class PendingVersion(OutModel):
    version: MemoryVersion
    diff: MemoryVersionDiff

    @classmethod
    def of(cls, change: PendingChange) -> PendingVersion:
        return cls(version=MemoryVersion.of(change.version, "basic"), diff=MemoryVersionDiff.of(change.diff))


class ReviewPage(OutModel):
    type: Literal["memory_store_review"] = "memory_store_review"
    memory_store_id: str
    read_approved_only: bool
    mark: ReviewMarkOut | None
    pending_count: int
    data: list[PendingVersion]
    next_page: str | None = None


class ReviewApprove(InModel):
    through_version_id: str = Field(description="This version and every version before it are approved")


class ReviewRevert(InModel):
    version_id: str = Field(description="The version whose change is undone by a new version")
