"""The values an import deals in: one version to replay, a file a folder import refused, the report."""

from __future__ import annotations

from dataclasses import dataclass, field

from gitmem.git.commits import VersionRecord


@dataclass(frozen=True)
class Incoming:
    """One version to replay as the source has it: its record (ids, operation, path, actor, times,
    redaction) and its content (None for a deletion or a redacted version)."""

    record: VersionRecord
    content: str | None = None


@dataclass(frozen=True)
class StoreFields:
    """What a new store made by an import is called and says of itself."""

    name: str
    description: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    encrypted: bool = False  # the source was: the new store is too


@dataclass(frozen=True)
class Refused:
    """A file a folder import left out, and why (a secret, a limit, a path)."""

    path: str  # relative to the folder
    reason: str


@dataclass(frozen=True)
class ImportReport:
    """What one run of an import did: ``imported`` versions replayed now, ``skipped`` already there
    (the earlier run of a resumed import), and the files refused (a folder import)."""

    store_id: str
    imported: int
    skipped: int
    resumed: bool
    refused: tuple[Refused, ...] = ()

    @property
    def versions(self) -> int:
        return self.imported + self.skipped
