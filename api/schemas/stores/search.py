"""Wire shapes of search, version diffs and restore, and their converters from the engine's values."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gitmem.api.schemas.common import InModel, OutModel
from gitmem.api.schemas.stores.memories import Memory, Precondition
from gitmem.api.schemas.stores.memory_versions import MemoryVersion
from gitmem.engine.index.search import SearchHit
from gitmem.engine.store.diff import DiffLine, Hunk, VersionDiff

# -- search ----------------------------------------------------------------------------------------


class SearchResult(OutModel):
    memory: Memory  # the basic view, as the memories routes render it
    score: float = Field(description="BM25 relevance; higher is better")
    snippets: list[str] = Field(description="Excerpts of the content with the matched words in **")

    @classmethod
    def of(cls, hit: SearchHit) -> SearchResult:
        return cls(memory=Memory.of(hit.note, "basic"), score=hit.score, snippets=list(hit.snippets))


class SearchResults(OutModel):
    data: list[SearchResult]
    next_page: str | None = None


# -- diffs -----------------------------------------------------------------------------------------


class DiffLineOut(OutModel):
    type: Literal["context", "removed", "added"]
    text: str
    newline: bool = Field(True, description="False for a last line without a line break")

    @classmethod
    def of(cls, line: DiffLine) -> DiffLineOut:
        return cls(type=line.kind, text=line.text, newline=line.newline)


class HunkOut(OutModel):
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    header: str
    lines: list[DiffLineOut]

    @classmethod
    def of(cls, hunk: Hunk) -> HunkOut:
        return cls(
            old_start=hunk.old_start,
            old_lines=hunk.old_lines,
            new_start=hunk.new_start,
            new_lines=hunk.new_lines,
            header=hunk.header,
            lines=[DiffLineOut.of(x) for x in hunk.lines],
        )


class MemoryVersionDiff(OutModel):
    type: Literal["memory_version_diff"] = "memory_version_diff"
    memory_store_id: str
    version: MemoryVersion = Field(description="The version shown (the new side), basic view")
    against: MemoryVersion | None = Field(description="The version compared with (the old side); null: none")
    old_path: str | None
    new_path: str | None
    renamed: bool
    redacted: bool = Field(description="A side is redacted: no content is compared or shown")
    diff: str = Field(description="A unified diff, as git diff prints it")
    hunks: list[HunkOut]

    @classmethod
    def of(cls, diff: VersionDiff) -> MemoryVersionDiff:
        return cls(
            memory_store_id=diff.new.store_id,
            version=MemoryVersion.of(diff.new, "basic"),
            against=MemoryVersion.of(diff.old, "basic") if diff.old is not None else None,
            old_path=diff.old_path,
            new_path=diff.new_path,
            renamed=diff.renamed,
            redacted=diff.redacted,
            diff=diff.unified,
            hunks=[HunkOut.of(h) for h in diff.hunks],
        )


# -- restore ---------------------------------------------------------------------------------------


class MemoryRestore(InModel):
    version_id: str = Field(description="The version whose content and path come back")
    precondition: Precondition | None = None
