"""The mount's syncer, its state and its pull side: changes made elsewhere brought into the folder.

:class:`gitmem.sync.syncer.Syncer` adds the push side (local changes sent to the store, three-way merges); this
module holds what both sides share (the *bases*: every note's text as last synced, and the counters).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from gitmem.sync.debounce import Debouncer
from gitmem.sync.folder import LocalFile, MountFolder, StatKey, conflict_path, is_ignored
from gitmem.sync.remote import Remote, RemoteEntry, RemoteNotFound, sha256_hex

log = logging.getLogger("gitmem.sync.mount")


@dataclass
class SyncedNote:
    """A note as last synced: what a precondition expects and what a merge starts from."""

    memory_id: str
    sha256: str
    content: str
    etag: str | None = None
    stat: StatKey | None = None  # the file as last written or seen equal to this


@dataclass
class Counters:
    pushed: int = 0
    pulled: int = 0
    merged: int = 0
    conflicts: int = 0
    rejected: int = 0
    errors: int = 0
    last_error: str | None = None
    reported: dict[str, Any] = field(default_factory=dict)  # path -> the state already logged as refused


class SyncState:
    """The bases, the counters and the pull side; the caller holds :attr:`lock` around every call."""

    def __init__(
        self, remote: Remote, folder: MountFolder, pending: Debouncer, *, read_only: bool, clean: bool, name: str
    ) -> None:
        self.remote = remote
        self.folder = folder
        self.pending = pending
        self.read_only = read_only
        self.clean = clean
        self.name = name
        self.bases: dict[str, SyncedNote] = {}
        self.counters = Counters()
        self.lock = threading.RLock()  # every change to the bases and to the folder's notes

    def error(self, message: str) -> None:
        self.counters.errors += 1
        self.counters.last_error = message

    def materialise(self, listing: dict[str, RemoteEntry]) -> None:
        """Write the store's notes into the folder; other files are removed (``clean``) or pushed later."""
        for path, entry in sorted(listing.items()):
            self._materialise_one(path, entry)
        for path, _key in list(self.folder.walk(self.bases, include_ignored=self.clean)):
            if path in self.bases:
                continue
            if self.clean:
                self.folder.remove(path)
                log.info("mount %s: removed %s (not a note)", self.name, path)
            elif not is_ignored(path):
                self.pending.touch([path])

    def refresh_stats(self) -> None:
        """The files' modes changed (and so their ctimes): take their stat keys again."""
        for path, base in self.bases.items():
            if base.stat is not None:
                base.stat = self.folder.stat(path) or base.stat

    def _materialise_one(self, path: str, entry: RemoteEntry) -> None:
        if self.folder.file(path) is None:
            self._report(path, entry.sha256, "the store's path cannot be a file here")
            return
        if entry.content is None:
            entry = self.remote.read(entry.memory_id)
        lf = self.folder.read(path)
        if lf is not None and lf.sha256 == entry.sha256:
            self.bases[path] = SyncedNote(entry.memory_id, entry.sha256, entry.content or "", entry.etag, lf.stat)
        elif lf is not None and lf.text is not None and not (self.clean or self.read_only):
            self._merge(path, None, lf, entry)  # a file left from before: keep both sides
        else:
            try:
                if not self.clean:
                    self._preserve(path, entry.sha256)
                self._write_note(path, entry)
            except OSError as exc:
                self.error(f"{path}: {exc}")
                log.error("mount %s: cannot write %s: %s", self.name, path, exc)

    def apply_remote(self, listing: dict[str, RemoteEntry]) -> None:
        by_id = {e.memory_id: e for e in listing.values()}
        pending = self.pending.paths()
        prefixes = tuple(p for p in pending if p.endswith("/"))

        def busy(p: str) -> bool:
            if self.read_only:
                return False
            return p in pending or (bool(prefixes) and p.startswith(prefixes))

        for path, base in list(self.bases.items()):
            entry = by_id.get(base.memory_id)
            if entry is not None and entry.path == path and entry.sha256 == base.sha256:
                continue
            if busy(path):
                continue
            lf = self.folder.read(path)
            if not self.read_only and (lf is None or lf.sha256 != base.sha256):
                self.pending.touch([path])  # changed on both sides: the local sync merges
                continue
            try:
                self._pull(path, base, entry, lf)
            except (OSError, RemoteNotFound) as exc:
                log.warning("mount %s: %s: %s", self.name, path, exc)
        known = {b.memory_id for b in self.bases.values()}
        for path, entry in sorted(listing.items()):
            if entry.memory_id in known or busy(path) or self.folder.file(path) is None:
                continue
            lf = self.folder.read(path)
            try:
                if lf is not None and lf.sha256 == entry.sha256 and lf.text is not None:
                    self.bases[path] = SyncedNote(entry.memory_id, entry.sha256, lf.text, entry.etag, lf.stat)
                elif lf is not None and lf.text is not None and not self.read_only:
                    self._merge(path, None, lf, self.remote.read(entry.memory_id))
                else:
                    self._preserve(path, entry.sha256)
                    self._write_note(path, self.remote.read(entry.memory_id))
                    self.counters.pulled += 1
            except (OSError, RemoteNotFound) as exc:
                log.warning("mount %s: %s: %s", self.name, path, exc)

    def _pull(self, path: str, base: SyncedNote, entry: RemoteEntry | None, lf: LocalFile | None) -> None:
        """Bring a note whose file is unchanged here up to the store: deleted, moved, or new text.

        Each step is skipped if the file changes under it; the local sync then merges as usual.
        """
        seen = lf.stat if lf is not None else None
        if entry is None:
            if self.folder.remove(path, expect=seen):
                del self.bases[path]
                self.counters.pulled += 1
                log.info("mount %s: %s deleted elsewhere", self.name, path)
            return
        if entry.path != path:
            if self.folder.file(entry.path) is None or not self.folder.remove(path, expect=seen):
                return
            del self.bases[path]
            log.info("mount %s: %s moved elsewhere to %s", self.name, path, entry.path)
            self._preserve(entry.path, entry.sha256)
            self._write_note(entry.path, self.remote.read(entry.memory_id))
            self.counters.pulled += 1
        elif (entry.sha256 != base.sha256 or lf is None) and self._write_note(
            path, self.remote.read(entry.memory_id), expect=seen
        ):
            self.counters.pulled += 1

    def _write_note(
        self, path: str, entry: RemoteEntry, *, expect: StatKey | None = None, otherwise: SyncedNote | None = None
    ) -> bool:
        """Write the note's file and make ``entry`` its base. With ``expect``, only if the file is still in
        that state; if not, the base becomes ``otherwise`` (or stays) and the path is synced again."""
        text = entry.content or ""
        key = self.folder.write(path, text, expect=expect)
        if key is None:
            if otherwise is not None:
                self.bases[path] = otherwise
            return False
        self.bases[path] = SyncedNote(entry.memory_id, sha256_hex(text), text, entry.etag, key)
        return True

    def _preserve(self, path: str, sha256: str) -> None:
        """A local file that is no note is about to be replaced by the note at its path: move it aside."""
        lf = self.folder.read(path)
        if lf is None or lf.sha256 == sha256 or path in self.bases:
            return
        keep = conflict_path(path, lf.sha256)
        self.folder.move_aside(path, keep)
        self.counters.conflicts += 1
        log.warning(
            "mount %s: %s arrived from the store where a different local file was; the local file is now %s",
            self.name,
            path,
            keep,
        )
        if not self.read_only:
            self.pending.touch([keep])

    def _report(self, path: str, key: Any, reason: str) -> None:
        if self.counters.reported.get(path) == key:
            return
        self.counters.reported[path] = key
        self.counters.rejected += 1
        log.warning("mount %s: %s not synced: %s", self.name, path, reason)

    def _merge(self, path: str, base: SyncedNote | None, lf: LocalFile, other: RemoteEntry) -> None:
        raise NotImplementedError  # the push side (gitmem.sync.syncer.Syncer) merges
