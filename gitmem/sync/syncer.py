"""The mount's syncer: a folder's notes pushed to and pulled from a :class:`gitmem.sync.remote.Remote`.

It keeps the *base* of every note (its text and SHA-256 as last synced), sends every local change with
that base as its precondition, and merges three ways (:mod:`gitmem.sync.merge`) when the precondition fails;
the rules are listed in :mod:`gitmem.sync.mount`. It writes the folder through :class:`MountFolder` and
schedules paths to look at again through the :class:`Debouncer`; its caller holds :attr:`Syncer.lock`
around every call that touches the bases or the folder's notes.
"""

from __future__ import annotations

import logging
from typing import Any

from gitmem.sync.folder import LocalFile, StatKey, conflict_path, is_ignored
from gitmem.sync.merge import merge3
from gitmem.sync.pull import SyncedNote, SyncState
from gitmem.sync.remote import (
    RemoteEntry,
    RemoteError,
    RemoteNotFound,
    RemotePathConflict,
    RemotePreconditionFailed,
    RemoteRefused,
    RemoteUnavailable,
    sha256_hex,
)

log = logging.getLogger("gitmem.sync.mount")


class Syncer(SyncState):
    """A mount's syncer: :class:`SyncState` plus the push side."""

    def sync_paths(self, paths: set[str]) -> None:
        """Push the local state of these notes (and folder prefixes), renames first. Holds the sync lock."""
        notes: set[str] = set()
        for p in paths:
            if p.endswith("/"):
                notes.update(b for b in self.bases if b.startswith(p))
                notes.update(q for q, _ in self.folder.walk(self.bases, under=p))
            else:
                notes.add(p)
        local = {p: self.folder.read(p) for p in notes}
        deleted = {p for p in notes if p in self.bases and local[p] is None}
        created = {p for p in notes if p not in self.bases and local[p] is not None and not is_ignored(p)}
        renames = {} if self.read_only else self._pair_renames(created, deleted, local)
        jobs: list[tuple[str, Any, tuple[Any, ...]]] = []
        for dest, src in renames.items():
            notes.discard(src)
            notes.discard(dest)
            jobs.append((dest, self._push_rename, (src, dest, local[dest])))
        jobs.extend((p, self._sync_one, (p,)) for p in sorted(notes))
        for n, (path, fn, args) in enumerate(jobs):
            if not self._attempt(path, fn, *args):  # the store is unreachable: retry the rest later
                later = [p for p, _, _ in jobs[n:]]
                later += [rest[0] for _, step, rest in jobs[n:] if step == self._push_rename]  # rename sources
                self.pending.touch(later, delay=max(self.pending.quiet, 1.0))
                break

    def _pair_renames(self, created: set[str], deleted: set[str], local: dict[str, LocalFile | None]) -> dict[str, str]:
        """Creations that are renames of deletions: a watchdog move, or the same content (also pairing with
        paths still waiting out their debounce)."""
        hints = self.pending.pop_moves(local)
        waiting = [q for q in sorted(self.pending.paths()) if not q.endswith("/") and q not in local]
        if (created or deleted) and waiting:
            for q in waiting:
                lf = self.folder.read(q)
                if q in self.bases and lf is None:
                    deleted.add(q)
                    local[q] = None
                elif q not in self.bases and lf is not None and not is_ignored(q):
                    created.add(q)
                    local[q] = lf
        renames: dict[str, str] = {}
        used: set[str] = set()
        for dest in sorted(created):
            src = hints.get(dest)
            if src in deleted and src not in used:
                renames[dest] = src
                used.add(src)
        for dest in sorted(created - set(renames)):
            lf = local[dest]
            assert lf is not None  # noqa: S101  narrows the type for mypy; never a check of input
            src = next((s for s in sorted(deleted - used) if self.bases[s].sha256 == lf.sha256), None)
            if src is not None:
                renames[dest] = src
                used.add(src)
        if renames:
            self.pending.take([*renames, *renames.values()])
        return renames

    def _attempt(self, path: str, fn: Any, *args: Any) -> bool:
        """Run one sync step; False if the store could not be reached (the caller retries later)."""
        try:
            fn(*args)
        except RemoteUnavailable as exc:
            log.warning("mount %s: %s: store unavailable, will retry: %s", self.name, path, exc.message)
            return False
        except (RemoteError, OSError) as exc:
            self.error(f"{path}: {exc}")
            log.error("mount %s: %s: %s", self.name, path, exc)
        return True

    def _sync_one(self, path: str) -> None:
        base = self.bases.get(path)
        if base is None and is_ignored(path):
            return
        lf = self.folder.read(path)
        if self.read_only:
            self._keep_read_only(path, base, lf)
            return
        if lf is None:
            if base is not None:
                self._push_delete(path, base)
            return
        if lf.text is None:
            self._report(path, lf.stat, "not UTF-8 text (or too large); not synced")
            return
        if base is None:
            self._push_create(path, lf)
        elif lf.sha256 == base.sha256:
            base.stat = lf.stat
        else:
            self._push_update(path, base, lf)

    def _push_create(self, path: str, lf: LocalFile) -> None:
        assert lf.text is not None  # noqa: S101  narrows the type for mypy; never a check of input
        if not self._valid(path, lf.stat):
            return
        try:
            entry = self.remote.create(path, lf.text)
        except RemotePathConflict as exc:
            other = self.remote.list_all().get(path)
            if other is None:
                self._report(path, lf.stat, f"collides with a note elsewhere in the store: {exc.message}")
                return
            self._merge(path, None, lf, self.remote.read(other.memory_id))
            return
        except RemoteRefused as exc:
            self._report(path, lf.stat, exc.message)
            return
        self._pushed(path, entry, lf, "created")

    def _push_update(self, path: str, base: SyncedNote, lf: LocalFile) -> None:
        assert lf.text is not None  # noqa: S101  narrows the type for mypy; never a check of input
        try:
            entry = self.remote.update(base.memory_id, content=lf.text, expected_sha256=base.sha256)
        except RemotePreconditionFailed:
            try:
                other = self.remote.read(base.memory_id)
            except RemoteNotFound:
                self._recreate(path, lf)
                return
            self._merge(path, base, lf, other)
            return
        except RemoteNotFound:
            self._recreate(path, lf)
            return
        except RemoteRefused as exc:
            self._report(path, lf.stat, exc.message)
            return
        # Keyed by the local path even if the note moved elsewhere meanwhile: the next poll moves the file.
        self._pushed(path, entry, lf, "updated")

    def _pushed(self, path: str, entry: RemoteEntry, lf: LocalFile, verb: str) -> None:
        """Remember what the store now holds at ``path`` as the base of the next three-way merge."""
        assert lf.text is not None  # noqa: S101  narrows the type for mypy; never a check of input
        self.bases[path] = SyncedNote(entry.memory_id, lf.sha256, lf.text, entry.etag, lf.stat)
        self.counters.pushed += 1
        self.counters.reported.pop(path, None)
        log.info("mount %s: %s %s", self.name, verb, path)

    def _recreate(self, path: str, lf: LocalFile) -> None:
        log.warning("mount %s: %s was deleted elsewhere but edited here; creating it again", self.name, path)
        self.bases.pop(path, None)
        self._push_create(path, lf)

    def _push_delete(self, path: str, base: SyncedNote) -> None:
        try:
            self.remote.delete(base.memory_id, expected_sha256=base.sha256)
        except RemotePreconditionFailed:
            other = self.remote.read(base.memory_id)
            log.warning(
                "mount %s: %s was deleted here but changed elsewhere; keeping the other change", self.name, path
            )
            self.counters.conflicts += 1
            self.bases.pop(path, None)
            self._write_note(other.path, other)
            return
        except RemoteNotFound:
            pass
        self.bases.pop(path, None)
        self.folder.prune_dirs(self.folder.file(path))
        self.counters.pushed += 1
        log.info("mount %s: deleted %s", self.name, path)

    def _push_rename(self, src: str, dest: str, lf: LocalFile | None) -> None:
        base = self.bases[src]
        if lf is None or lf.text is None or not self._valid(dest, lf.stat):
            self._sync_one(src)  # the note's file went somewhere we cannot follow: a deletion
            self._sync_one(dest)
            return
        content = lf.text if lf.sha256 != base.sha256 else None
        try:
            entry = self.remote.update(base.memory_id, path=dest, content=content, expected_sha256=base.sha256)
        except RemotePreconditionFailed:
            # Changed elsewhere: move it anyway (a path alone overwrites nobody's text), then merge the text.
            entry = self.remote.update(base.memory_id, path=dest)
            del self.bases[src]
            self.bases[dest] = SyncedNote(entry.memory_id, base.sha256, base.content, None, None)
            self.counters.pushed += 1
            self._sync_one(dest)
            return
        except RemoteNotFound:
            del self.bases[src]
            self._push_create(dest, lf)
            return
        except RemotePathConflict:
            self._sync_one(src)
            self._sync_one(dest)
            return
        del self.bases[src]
        self.bases[dest] = SyncedNote(entry.memory_id, lf.sha256, lf.text, entry.etag, lf.stat)
        self.folder.prune_dirs(self.folder.file(src))
        self.counters.pushed += 1
        log.info("mount %s: renamed %s -> %s", self.name, src, dest)

    def _merge(self, path: str, base: SyncedNote | None, lf: LocalFile, other: RemoteEntry) -> None:
        """Three-way merge of this side's ``lf`` and the store's ``other`` from ``base``."""
        assert lf.text is not None  # noqa: S101  narrows the type for mypy; never a check of input
        for _ in range(5):
            remote_text = other.content or ""
            result = merge3(base.content if base else "", lf.text, remote_text, labels=("local", "base", "remote"))
            if not result.clean:
                break
            if result.text == remote_text:
                pushed = other
            else:
                try:
                    pushed = self.remote.update(other.memory_id, content=result.text, expected_sha256=other.sha256)
                except RemotePreconditionFailed:
                    other = self.remote.read(other.memory_id)
                    continue
            pushed = RemoteEntry(pushed.memory_id, pushed.path, sha256_hex(result.text), pushed.etag, result.text)
            self.counters.merged += 1
            self.counters.pushed += 1
            log.info("mount %s: merged changes made elsewhere into %s", self.name, path)
            self._land(path, pushed, lf)
            return
        # Overlapping edits: the store's text stays the note; this side's text is kept beside it.
        keep = conflict_path(other.path, lf.sha256)
        self.counters.conflicts += 1
        log.warning(
            "mount %s: %s was changed here and elsewhere in the same place; kept the other change "
            "in %s and this one in %s",
            self.name,
            path,
            other.path,
            keep,
        )
        self.folder.write(keep, lf.text)
        self.pending.touch([keep], delay=0)
        self._land(path, other, lf)

    def _land(self, path: str, entry: RemoteEntry, lf: LocalFile) -> None:
        """Make ``entry`` the base and the file of the note whose file at ``path`` held ``lf``.

        If the file changed again meanwhile it is left alone, with ``lf`` as its base: its next sync then
        merges the newer edit onto ``entry``.
        """
        since = SyncedNote(entry.memory_id, lf.sha256, lf.text or "", None, None)
        if entry.path != path:
            if not self.folder.remove(path, expect=lf.stat):
                self.bases[path] = since
                return
            self.bases.pop(path, None)
            self._preserve(entry.path, entry.sha256)
            self._write_note(entry.path, entry)
        else:
            self._write_note(path, entry, expect=lf.stat, otherwise=since)

    def _keep_read_only(self, path: str, base: SyncedNote | None, lf: LocalFile | None) -> None:
        if base is None:
            if lf is not None:
                self._report(path, lf.stat, "the store is mounted read-only; not pushed")
            return
        if lf is not None and lf.sha256 == base.sha256:
            base.stat = lf.stat
            return
        log.warning(
            "mount %s: %s is read-only; the local change is not pushed and the store's text is back", self.name, path
        )
        self.counters.rejected += 1
        base.stat = self.folder.write(path, base.content)

    def _valid(self, path: str, key: StatKey) -> bool:
        try:
            self.remote.validate_path(path)
        except ValueError as exc:
            self._report(path, key, str(exc))
            return False
        return True

    def scan_local(self) -> set[str]:
        """Notes whose file differs from what was last synced, and files that are no note yet."""
        found: set[str] = set()
        seen: set[str] = set()
        for path, key in self.folder.walk(self.bases):
            seen.add(path)
            base = self.bases.get(path)
            if base is None:
                if self.counters.reported.get(path) != key:
                    found.add(path)
            elif base.stat != key:
                found.add(path)
        found.update(p for p in self.bases if p not in seen)
        return found
