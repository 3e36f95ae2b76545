"""``gitmem export``'s archive: a store's whole history, readable with gitmem or without it.

One ``.tar.gz`` holding three files:

- ``manifest.json``: what it is (``"format": "gitmem-export"``, its version), the store (id, name,
  description, metadata, when it was made), when it was exported, the commit ``main`` was at, and how
  many versions and notes it holds;
- ``history.bundle``: a Git bundle of ``main``, the push notes (``refs/notes/gitmem``), the kept
  conflicts and the review line: ``git clone history.bundle`` is the store as a repository, every
  version a commit with its trailers;
- ``versions.jsonl``: one version a line, oldest first, with its ids, operation, path, content, digest
  and size, ``created_by``, ``created_at``, the note's ``memory_created_at``, and its redaction if it was
  redacted (then no path and no content).

The export reads under the store's rewrite lock (no retention or redaction run moves history under it)
and writes the versions from the very commit the bundle holds as ``main``. :class:`ArchiveSource`
reads an archive back for :func:`gitmem.engine.transfer.replay.run_import`: the round trip gives the
same notes and versions, ids, actors and times.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pygit2

from gitmem.clock import iso, system_clock
from gitmem.engine.rewrite.history import History
from gitmem.engine.rewrite.locked_git import NO_HOOKS, rewrite_lock
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.transfer.journal import Journal
from gitmem.engine.transfer.replay import Progress
from gitmem.engine.transfer.values import Incoming, Refused, StoreFields
from gitmem.errors import InvalidRequest, RewriteFailed
from gitmem.git.commits import VersionRecord, parse_time
from gitmem.git.repository import MAIN, NOTES_REF, read_tip
from gitmem.model import Actor, StoreInfo

log = logging.getLogger(__name__)

FORMAT = "gitmem-export"
FORMAT_VERSION = 1
MANIFEST, BUNDLE, VERSIONS = "manifest.json", "history.bundle", "versions.jsonl"
_BUNDLED = (MAIN, NOTES_REF, "refs/conflicts/", "refs/reviews/")


@dataclass(frozen=True)
class ExportReport:
    path: Path
    versions: int
    notes: int
    size_bytes: int


def export_store(
    store: MemoryStore, info: StoreInfo, dest: Path, progress: Progress | None = None, *, decrypted: bool = False
) -> ExportReport:
    """Write ``store``'s archive to ``dest`` (replaced whole, never left half-written). An encrypted
    store only ``decrypted``: its versions.jsonl then holds the notes in plaintext (the bundle keeps the
    ciphertext, which no other key opens), and a store imported from it is encrypted under a key of its own."""
    if info.encrypted and not decrypted:
        raise InvalidRequest(
            f"memory store {info.id} is encrypted: its export holds the notes decrypted (the bundle's ciphertext"
            " opens with this home's key only); say so with --decrypted and keep the archive as the notes"
        )
    given, dest = dest, dest.absolute()
    with tempfile.TemporaryDirectory(prefix="gitmem-export-") as scratch:
        folder = Path(scratch)
        with rewrite_lock(store.path, timeout=60.0):
            main = _bundle(store, folder / BUNDLE)
            versions, notes = _write_versions(store, main, folder / VERSIONS, progress)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "store": {
                "id": info.id,
                "name": info.name,
                "description": info.description,
                "metadata": info.metadata,
                "created_at": iso(info.created_at),
                "encrypted": info.encrypted,
            },
            "exported_at": iso(system_clock()),
            "main": main,
            "versions": versions,
            "notes": notes,
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        temporary = dest.with_name(dest.name + ".partial")
        try:
            with tarfile.open(temporary, "w:gz") as tar:
                for name in (MANIFEST, VERSIONS, BUNDLE):
                    if (folder / name).exists():
                        tar.add(folder / name, arcname=name)
            with open(temporary, "rb") as written:
                os.fsync(written.fileno())
            os.replace(temporary, dest)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise InvalidRequest(f"cannot write {given}: {exc.strerror or exc}") from None
    return ExportReport(given, versions, notes, dest.stat().st_size)


def _bundle(store: MemoryStore, path: Path) -> str | None:
    """Bundle the store's refs into ``path``; the commit ``main`` has there (None: no history yet)."""
    if read_tip(store.repo) is None:
        return None
    refs = [name for name in store.repo.references if any(name == p or name.startswith(p) for p in _BUNDLED)]
    git = ["git", "-C", str(store.path), *NO_HOOKS]
    # HEAD too (it names main), so that `git clone history.bundle` checks main out.
    made = subprocess.run([*git, "bundle", "create", "-q", str(path), "HEAD", *refs], capture_output=True, text=True)  # noqa: S603  git from PATH, an argument list (no shell)
    if made.returncode != 0:
        raise RewriteFailed(f"git bundle of {store.id} failed: {made.stderr.strip()}")
    heads = subprocess.run([*git, "bundle", "list-heads", str(path)], capture_output=True, text=True, check=True)  # noqa: S603  git from PATH, an argument list (no shell)
    for line in heads.stdout.splitlines():
        commit, _, ref = line.partition(" ")
        if ref == MAIN:
            return commit
    raise RewriteFailed(f"the bundle of {store.id} holds no {MAIN}")


def _write_versions(store: MemoryStore, main: str | None, path: Path, progress: Progress | None) -> tuple[int, int]:
    """Every version of ``main``, oldest first, as JSON lines; (versions, notes live at ``main``)."""
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        if main is None:
            return 0, 0
        history = History(store.repo)
        entries = history.read(pygit2.Oid(hex=main), None)
        for entry in entries:
            content = None
            if entry.blob is not None and entry.record.path is not None:
                content = store.codec.decode(entry.record.path, store.repo[entry.blob].read_raw()).decode("utf-8")
            out.write(json.dumps(version_json(entry.record, content, entry.commit), ensure_ascii=False) + "\n")
            count += 1
            if progress is not None and count % 500 == 0:
                progress("exporting", count, len(entries))
        return count, len(history.live())


def version_json(record: VersionRecord, content: str | None, commit: str | None = None) -> dict[str, Any]:
    """One line of ``versions.jsonl``."""
    return {
        "id": record.version_id,
        "memory_id": record.memory_id,
        "operation": record.operation,
        "path": record.path,
        "content": content,
        "content_sha256": record.content_sha256,
        "content_size_bytes": record.content_size,
        "created_at": iso(record.created_at),
        "created_by": record.created_by.as_dict() if record.created_by else None,
        "memory_created_at": iso(record.note_created_at),
        "redacted_at": iso(record.redacted_at) if record.redacted_at else None,
        "redacted_by": record.redacted_by.as_dict() if record.redacted_by else None,
        "commit": commit,
    }


def _actor(data: object) -> Actor | None:
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise InvalidRequest(f"{data!r} is not an actor")
    probe = Actor(data["type"], "")
    try:
        return Actor(probe.type, str(data[probe.id_field]))
    except KeyError:
        raise InvalidRequest(f"{data!r} is not an actor") from None


def incoming_from_json(data: dict[str, Any]) -> Incoming:
    """A line of ``versions.jsonl`` as a version to replay."""
    try:
        created_at = parse_time(data["created_at"])
        record = VersionRecord(
            memory_id=str(data["memory_id"]),
            version_id=str(data["id"]),
            operation=data["operation"],
            path=data.get("path"),
            content_sha256=data.get("content_sha256"),
            content_size=data.get("content_size_bytes"),
            created_by=_actor(data.get("created_by")),
            created_at=created_at,
            note_created_at=parse_time(data["memory_created_at"]) if data.get("memory_created_at") else created_at,
            redacted_at=parse_time(data["redacted_at"]) if data.get("redacted_at") else None,
            redacted_by=_actor(data.get("redacted_by")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidRequest(f"a line of {VERSIONS} is not a version: {exc}") from None
    content = data.get("content")
    return Incoming(record, content if isinstance(content, str) else None)


class ArchiveSource:
    """A ``gitmem export`` archive as an import's source (:class:`gitmem.engine.transfer.replay.Source`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with tarfile.open(path, "r:*") as tar:
                self.manifest = json.load(_member(tar, MANIFEST))
        except (OSError, tarfile.TarError, ValueError) as exc:
            raise InvalidRequest(f"{path} is not a gitmem export: {exc}") from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != FORMAT:
            raise InvalidRequest(f"{path} is not a gitmem export (its manifest names no format {FORMAT!r})")
        if self.manifest.get("format_version") != FORMAT_VERSION:
            raise InvalidRequest(f"{path} is a gitmem export of format {self.manifest.get('format_version')}")

    @property
    def key(self) -> str:
        m = self.manifest
        return f"archive {m['store'].get('id')} {m.get('main')} {m.get('exported_at')}"

    def fields(self) -> StoreFields:
        store = self.manifest["store"]
        return StoreFields(
            str(store.get("name") or "imported"),
            str(store.get("description") or ""),
            dict(store.get("metadata") or {}),
            encrypted=bool(store.get("encrypted")),
        )

    def prepare(self, store: MemoryStore, spool: Journal, progress: Progress) -> int:  # noqa: ARG002  the Source protocol's signature
        count = sum(1 for _ in self._lines())
        if count != self.manifest.get("versions"):
            raise InvalidRequest(
                f"{self.path} holds {count} versions; its manifest says {self.manifest.get('versions')}"
            )
        return count

    def versions(self) -> Iterator[Incoming]:
        for line in self._lines():
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise InvalidRequest(f"a line of {VERSIONS} is not JSON: {exc}") from None
            yield incoming_from_json(data)

    def refused(self) -> tuple[Refused, ...]:
        return ()

    def _lines(self) -> Iterator[str]:
        with tarfile.open(self.path, "r:*") as tar:
            for line in io.TextIOWrapper(_member(tar, VERSIONS), encoding="utf-8"):
                if line.strip():
                    yield line


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    try:
        found = tar.extractfile(name)
    except KeyError:
        raise InvalidRequest(f"the archive holds no {name}") from None
    if found is None:
        raise InvalidRequest(f"the archive's {name} is not a file")
    return found


__all__ = ["ArchiveSource", "ExportReport", "export_store", "incoming_from_json", "version_json"]
