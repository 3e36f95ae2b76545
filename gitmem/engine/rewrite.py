"""History rewriting: the one mechanism behind retention, redaction and purge (docs/architecture.md).

``main``'s versions are replayed in order onto a new root, one commit per version, keeping some,
dropping or blanking others. Every record is re-emitted with :func:`format_message`, so ids, authors
and times survive (a pushed commit that changed several notes becomes one commit per version, its
derived ids written as trailers). Each new tree is the previous new tree plus that version's state:
a created/modified version sets its note's path to its blob (removing the note's previous path), a
deleted version removes it, a redacted version changes no tree and names no path, a dropped version
disappears.

Safety, in order:

1. Under ``gitmem/rewrite.lock`` (one rewrite at a time per store), take a snapshot of the tip and
   build the new history without holding the writer lock (``git fast-import`` into a temporary ref,
   one pack, no loose-object storm). Check that it ends with exactly the notes the snapshot has.
2. Take :func:`repository.writer_lock`, replay the commits that landed since the snapshot on top of
   the new history, write the purge marker, and :func:`repository.compare_and_swap` ``main``.
3. Still under the writer lock (and the packer's lock), physically delete what is unreachable:
   drop ``refs/notes/gitmem`` entries for commits that no longer exist, expire reflogs,
   ``git repack -a -d``, ``git prune --expire=now``, remove stale packs and temporary files.
4. Rebuild the index (``catch_up`` sees a ``main`` that does not descend from what it indexed), then
   ``VACUUM`` it so old paths do not linger in free pages; verify that every blob only the old
   history used is unreadable (``git cat-file``) and report it.

A crash anywhere leaves the old history or the new one: before the swap only unreferenced objects
were written; after it, ``gitmem/purge-pending.json`` makes the next rewrite (or
:func:`finish_pending_purge`) finish the deletion.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

import pygit2

from gitmem.errors import GitmemError, StoreBusy
from gitmem.git import repository
from gitmem.git.commits import VersionRecord, format_message, parse_message
from gitmem.git.repository import MAIN, NOTES_REF, read_tip
from gitmem.model import Actor
from gitmem.rules import paths

if TYPE_CHECKING:
    from gitmem.engine.store import MemoryStore

log = logging.getLogger(__name__)

REWRITE_REF = "refs/gitmem/rewrite"
PURGE_MARKER = "purge-pending.json"
MAX_SWAP_ATTEMPTS = 20
STALE_TEMP_SECONDS = 60.0
PUSH_WAIT_SECONDS = 10.0
CRASH_ENV = "GITMEM_REWRITE_CRASH_AT"  # tests only: SIGKILL ourselves at a named step
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


class RewriteFailed(GitmemError):
    """The rewrite could not be made safely; the store is unchanged."""


class _Diverged(Exception):
    """``main`` no longer descends from the snapshot (someone else rewrote it)."""


Signature = tuple[str, str, int, int]  # name, email, seconds, offset in minutes (no pygit2 object kept)


@dataclass(frozen=True)
class Entry:
    """One version of ``main``'s history, as the rewrite sees it."""

    seq: int  # position in history, 0 = oldest
    record: VersionRecord
    blob: str | None  # the note's blob after this version; None if deleted or redacted
    mode: int  # the blob's file mode in the tree
    commit: str  # the commit it came from
    author: Signature
    committer: Signature

    @property
    def redacted(self) -> bool:
        return self.record.redacted_at is not None

    @property
    def changes_state(self) -> bool:
        """Whether replaying it changes the tree: a redacted version does not, except a delete."""
        return not self.redacted or self.record.operation == "deleted"

    def redact(self, when: dt.datetime, by: Actor | None) -> Entry:
        return replace(self, record=self.record.redacted(when, by), blob=None)


# A plan sees every version (oldest first) and the ids of the notes that exist at the tip, and says
# what each becomes: the same Entry (kept as is), another Entry (blanked, or a new blob) or None (dropped).
Plan = Callable[[Sequence[Entry], frozenset[str]], list["Entry | None"]]
Progress = Callable[[int, int], None]


@dataclass
class RewriteReport:
    store_id: str
    dry_run: bool = False
    changed: bool = False
    versions_before: int = 0
    versions_after: int = 0
    dropped: list[str] = field(default_factory=list)  # version ids
    redacted: list[str] = field(default_factory=list)  # version ids newly redacted
    replayed: int = 0  # versions that landed while the rewrite ran, replayed on top
    blobs_purged: list[str] = field(default_factory=list)  # verified unreadable
    blobs_shared: list[str] = field(default_factory=list)  # still used by a kept version: kept
    blobs_unpurged: list[str] = field(default_factory=list)  # should be gone but can still be read
    bytes_before: int = 0
    bytes_after: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    old_tip: str | None = None
    new_tip: str | None = None

    @property
    def seconds(self) -> float:
        return sum(self.timings.values())


# -- reading history ------------------------------------------------------------------------------

_LOG_FORMAT = "%x01%H%x00%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd%x00%B"
_TEXT = ("utf-8", "surrogateescape")


def _raw_signature(name: bytes, email: bytes, date: bytes) -> Signature:
    seconds, _, zone = date.decode().partition(" ")
    offset = int(zone[1:3]) * 60 + int(zone[3:5]) if len(zone) == 5 else 0
    return (name.decode(*_TEXT), email.decode(*_TEXT), int(seconds), -offset if zone[:1] == "-" else offset)


def _log_commits(
    repo_path: Path, revisions: str
) -> Iterator[tuple[str, Signature, Signature, str, dict[str, tuple[int, str, str]]]]:
    """``main``'s commits, first parent first, each with what it changed, streamed from one
    ``git log --raw -z`` (Git walks and diffs; nothing but the current commit is held in memory):
    (commit, author, committer, message, {tree path: (mode, blob, status)})."""
    args = [
        "git",
        "-C",
        str(repo_path),
        *_NO_HOOKS,
        "-c",
        "i18n.logOutputEncoding=UTF-8",
        "log",
        "--first-parent",
        "--reverse",
        "--root",
        "--no-renames",
        "--raw",
        "--no-abbrev",
        "-z",
        "--no-show-signature",
        "--date=raw",
        f"--format={_LOG_FORMAT}",
        revisions,
        "--",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=_held_fds())
    assert proc.stdout is not None
    current: list[bytes] | None = None
    changes: dict[str, tuple[int, str, str]] = {}
    pending_header: bytes | None = None

    def finish() -> tuple[str, Signature, Signature, str, dict[str, tuple[int, str, str]]]:
        assert current is not None
        commit, an, ae, ad, cn, ce, cd, body = current
        return (commit.decode(), _raw_signature(an, ae, ad), _raw_signature(cn, ce, cd), body.decode(*_TEXT), changes)

    rest = b""
    try:
        while True:
            chunk = proc.stdout.read1(1 << 20)  # type: ignore[attr-defined]  # buffered: a BufferedReader
            tokens = (rest + chunk).split(b"\0")
            rest = tokens.pop() if chunk else b""
            for token in tokens:
                if current is not None and len(current) < 8:
                    current.append(token)
                    continue
                if pending_header is not None:
                    _old_mode, new_mode, _old, new, status = pending_header.split(b" ")
                    changes[token.decode(*_TEXT)] = (int(new_mode, 8), new.decode(), status.decode())
                    pending_header = None
                    continue
                token = token.lstrip(b"\n")
                if token.startswith(b"\x01"):
                    if current is not None:
                        yield finish()
                    current, changes = [token[1:]], {}
                elif token.startswith(b":"):
                    pending_header = token[1:]
            if not chunk:
                break
        if current is not None:
            yield finish()
    finally:
        proc.stdout.close()
        code = proc.wait()
    if code != 0:
        raise RewriteFailed(f"git log of {repo_path.name} failed (exit {code})")


class _History:
    """Walks ``main`` first parent first and turns commits into entries, keeping the notes' state the
    way the index does (so pushed commits get the very ids the index derived for them)."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self.path = Path(repo.path)
        self.seq = 0
        self.where: dict[str, str] = {}  # memory id -> api path, for notes that exist
        self.owner: dict[str, str] = {}  # api path -> memory id
        self.created: dict[str, dt.datetime] = {}

    def read(self, tip: pygit2.Oid, base: pygit2.Oid | None) -> list[Entry]:
        if base is not None and tip != base and not self.repo.descendant_of(tip, base):
            raise _Diverged
        entries: list[Entry] = []
        revisions = str(tip) if base is None else f"{base}..{tip}"
        for commit, author, committer, message, changes in _log_commits(self.path, revisions):
            entries += self._entries(commit, author, committer, message, changes)
        return entries

    def live(self) -> frozenset[str]:
        return frozenset(self.where)

    def _entries(
        self,
        commit_id: str,
        author: Signature,
        committer: Signature,
        message: str,
        changes: dict[str, tuple[int, str, str]],
    ) -> list[Entry]:
        records = parse_message(message)
        pushed = not records
        if pushed:
            from gitmem.git.pushes import derive_versions

            commit = repository.commit_at(self.repo, commit_id)
            records = derive_versions(self.repo, commit, self.owner.get, self._pushed_note(commit))
        out = []
        for record in records:
            if pushed and record.memory_id in self.created:
                record = replace(record, note_created_at=self.created[record.memory_id])
            blob, mode = None, 0
            if record.redacted_at is None and record.operation != "deleted" and record.path is not None:
                tree_path = paths.git_path(record.path)
                change = changes.get(tree_path)
                if change is not None and change[2] != "D":
                    mode, blob = change[0], change[1]
                else:  # not changed by this commit (a version that changed nothing?): ask its tree
                    try:
                        item = self.repo[commit_id].tree[tree_path]
                        blob, mode = str(item.id), item.filemode
                    except KeyError:
                        log.warning("commit %s names %s but its tree lacks it", commit_id, record.path)
            entry = Entry(self.seq, record, blob, mode, commit_id, author, committer)
            self.seq += 1
            self._apply(entry)
            out.append(entry)
        return out

    def _pushed_note(self, commit: pygit2.Commit) -> dict[str, object]:
        try:
            note = self.repo.lookup_note(str(commit.id), NOTES_REF)
            return json.loads(note.message)
        except (KeyError, ValueError, pygit2.GitError):
            return {}

    def _apply(self, entry: Entry) -> None:
        record, mid = entry.record, entry.record.memory_id
        if record.operation == "deleted":
            old = self.where.pop(mid, None)
            if old is not None and self.owner.get(old) == mid:
                del self.owner[old]
            return
        if entry.blob is None or record.path is None:
            return
        old = self.where.get(mid)
        if old is not None and old != record.path and self.owner.get(old) == mid:
            del self.owner[old]
        other = self.owner.get(record.path)
        if other is not None and other != mid:
            self.where.pop(other, None)
        self.owner[record.path] = mid
        self.where[mid] = record.path
        self.created.setdefault(mid, record.note_created_at)


# -- writing the new history ----------------------------------------------------------------------


def _quote(tree_path: str) -> bytes:
    out = bytearray(b'"')
    for byte in tree_path.encode("utf-8", "surrogateescape"):
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


def _signature(sig: Signature) -> bytes:
    name, email, seconds, offset = sig
    sign = "-" if offset < 0 else "+"
    minutes = abs(offset)
    name = name.replace("<", "").replace(">", "").replace("\n", " ")
    email = email.replace("<", "").replace(">", "").replace("\n", " ")
    return f"{name} <{email}> {seconds} {sign}{minutes // 60:02d}{minutes % 60:02d}".encode(*_TEXT)


def _folders(tree_path: str) -> list[str]:
    parts = tree_path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


class _Emitter:
    """Builds the new history with ``git fast-import`` on :data:`REWRITE_REF`; remembers where each
    note sits in the new tree across runs (the landed commits are a second run)."""

    def __init__(self, repo_path: Path) -> None:
        self.repo_path = repo_path
        self.where: dict[str, str] = {}  # memory id -> tree path in the new tree
        self.owner: dict[str, str] = {}  # tree path -> memory id
        self.below: Counter[str] = Counter()  # folder -> notes under it
        self.blobs: set[str] = set()  # every blob the new history references
        self.commits = 0

    def _claim(self, tree_path: str, mid: str) -> None:
        self.owner[tree_path] = mid
        self.where[mid] = tree_path
        for folder in _folders(tree_path):
            self.below[folder] += 1

    def _release(self, tree_path: str) -> None:
        mid = self.owner.pop(tree_path)
        if self.where.get(mid) == tree_path:
            del self.where[mid]
        for folder in _folders(tree_path):
            self.below[folder] -= 1
            if not self.below[folder]:
                del self.below[folder]

    def _changes(self, entry: Entry) -> list[bytes]:
        record, mid = entry.record, entry.record.memory_id
        if record.operation == "deleted":
            old = self.where.get(mid)
            if old is not None and self.owner.get(old) == mid:
                self._release(old)
                return [b"D " + _quote(old)]
            return []
        if entry.redacted or entry.blob is None or record.path is None:
            return []
        new = paths.git_path(record.path)
        out = []
        old = self.where.get(mid)
        if old is not None and old != new and self.owner.get(old) == mid:
            self._release(old)
            out.append(b"D " + _quote(old))
        # Only a redaction can make the new tree differ from the old one at this point, so that a
        # note still sits where this one goes; it is displaced, as the index does.
        clashes = [p for p in [new, *_folders(new)] if p in self.owner and self.owner[p] != mid]
        if self.below.get(new):
            clashes += [p for p in self.owner if p.startswith(new + "/")]
        for clash in clashes:
            self._release(clash)
        if self.owner.get(new) == mid:
            self._release(new)
        out.append(b"M %o %s " % (entry.mode or 0o100644, entry.blob.encode()) + _quote(new))
        self._claim(new, mid)
        self.blobs.add(entry.blob)
        return out

    def _stream(self, out: IO[bytes], entries: Sequence[Entry], parent: str | None, progress: Progress | None) -> None:
        ref = REWRITE_REF.encode()
        if not entries:  # every version went: the history is one empty root commit
            out.write(
                b"commit %s\nauthor gitmem <gitmem@localhost> 0 +0000\n"
                b"committer gitmem <gitmem@localhost> 0 +0000\ndata 17\nhistory is empty\n\n" % ref
            )
        for done, entry in enumerate(entries, 1):
            message = format_message([entry.record]).encode()
            head = [
                b"commit " + ref,
                b"author " + _signature(entry.author),
                b"committer " + _signature(entry.committer),
                b"data %d" % len(message),
            ]
            out.write(b"\n".join(head) + b"\n" + message + b"\n")
            if parent is not None and done == 1:
                out.write(b"from " + parent.encode() + b"\n")
            for change in self._changes(entry):
                out.write(change + b"\n")
            out.write(b"\n")
            self.commits += 1
            if progress is not None and (done % 500 == 0 or done == len(entries)):
                progress(done, len(entries))
        out.write(b"done\n")

    def run(self, entries: Sequence[Entry], parent: str | None, progress: Progress | None = None) -> str:
        """Append ``entries`` as commits after ``parent`` (a new root if None); return the new tip."""
        if not entries and parent is not None:
            return parent
        args = ["git", "-C", str(self.repo_path), *_NO_HOOKS, "-c", "fastimport.unpackLimit=0"]
        if not repository.fsync_enabled():
            args += ["-c", "core.fsync=none"]
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                [*args, "fast-import", "--quiet", "--done", "--force"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                pass_fds=_held_fds(),
            )
            assert proc.stdin is not None
            try:
                self._stream(proc.stdin, entries, parent, progress)
            except BrokenPipeError:
                pass
            finally:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()
                code = proc.wait()
            if code != 0:
                errors.seek(0)
                raise RewriteFailed(f"git fast-import failed: {errors.read().decode(errors='replace').strip()}")
        if repository.fsync_enabled():
            for sub in ("objects/pack", "refs/gitmem"):
                with contextlib.suppress(OSError):
                    repository.fsync_dir(self.repo_path / sub)
        result = _git(self.repo_path, "rev-parse", "--verify", REWRITE_REF)
        return result.stdout.decode().strip()


def _flatten(repo: pygit2.Repository, oid: pygit2.Oid | str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if oid is None:
        return out

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for item in tree:
            assert item.name is not None  # a tree's entries are named; only looked-up objects are not
            if item.type_str == "tree":
                walk(repository.tree_at(repo, item.id), prefix + item.name + "/")
            else:
                out[prefix + item.name] = str(item.id)

    walk(repository.commit_at(repo, oid).tree, "")
    return out


def _check_same_notes(repo: pygit2.Repository, old: pygit2.Oid, new: str, blob_map: dict[str, str]) -> None:
    """The new history must end with the notes ``old`` has (blobs a plan replaced, e.g. re-encrypted
    ones, mapped through ``blob_map``)."""
    before = {path: blob_map.get(blob, blob) for path, blob in _flatten(repo, old).items()}
    after = _flatten(repo, new)
    if before != after:
        differ = sorted(set(before.items()) ^ set(after.items()))
        log.error("rewritten history of %s ends with other notes than main: %s", repo.path, differ[:10])
        raise RewriteFailed("the rewritten history would change the store's current notes; nothing was changed")


# -- locks, markers, crash points -----------------------------------------------------------------


_held = threading.local()


def _held_fds() -> tuple[int, ...]:
    """The lock files this thread holds. Every git child inherits them, so if we die mid-way (SIGKILL),
    a lock stays held until the last child exits: no writer resumes while an orphaned ``git prune``
    still runs."""
    return tuple(getattr(_held, "fds", ()))


@contextlib.contextmanager
def _flock(path: Path, *, timeout: float, what: str) -> Iterator[None]:
    fds: list[int] = _held.__dict__.setdefault("fds", [])
    with repository.file_lock(path, timeout=timeout, busy=f"the store is busy with {what}; try again later") as fd:
        fds.append(fd)
        try:
            yield
        finally:
            fds.remove(fd)


@contextlib.contextmanager
def _writer_lock(store: MemoryStore) -> Iterator[None]:
    """:func:`repository.writer_lock`'s flock on ``gitmem/write.lock``, taken here so that its file
    descriptor can be handed to git children (see :func:`_held_fds`); with an index on PostgreSQL,
    also the store's writer lock there, which holds across nodes (a flock on a shared volume may not)."""
    with _flock(store.path / "gitmem" / "write.lock", timeout=30.0, what="writes"), store.index.cluster_writer_lock():
        yield


def _git(repo_path: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(repo_path), *_NO_HOOKS, *args],
        input=input,
        capture_output=True,
        check=False,
        pass_fds=_held_fds(),
    )


def _checkpoint(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _marker(repo_path: Path) -> Path:
    return repo_path / "gitmem" / PURGE_MARKER


def _read_marker(repo_path: Path) -> set[str] | None:
    try:
        return set(json.loads(_marker(repo_path).read_text())["blobs"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        return set()


def _write_marker(repo_path: Path, blobs: Iterable[str]) -> None:
    path = _marker(repo_path)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        json.dump({"blobs": sorted(blobs)}, f)
        if repository.fsync_enabled():
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if repository.fsync_enabled():
        repository.fsync_dir(path.parent)


def _git_ok(repo_path: Path, *args: str, input: bytes | None = None) -> bytes:
    result = _git(repo_path, *args, input=input)
    if result.returncode != 0:
        raise RewriteFailed(f"git {args[0]} failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def _delete_ref(repo_path: Path, ref: str) -> None:
    _git(repo_path, "update-ref", "-d", ref)


def objects_size(repo_path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(repo_path / "objects"):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


# -- purge ----------------------------------------------------------------------------------------


def _on_main(repo_path: Path) -> set[str]:
    return set(_git_ok(repo_path, "rev-list", MAIN).decode().split())


def _prune_notes(repo_path: Path, on_main: set[str]) -> None:
    """Keep ``refs/notes/gitmem`` entries only for commits on ``main`` (the rest became trailers), in a
    notes commit without parents, so old notes' history becomes unreachable too."""
    repo = pygit2.Repository(str(repo_path))
    ref = repo.references.get(NOTES_REF)
    if ref is None:
        return
    notes = [(str(n.annotated_id), n.id) for n in repo.notes(NOTES_REF)]  # type: ignore[call-arg]  # the stub lacks notes(ref)
    kept = [(commit, blob) for commit, blob in notes if commit in on_main]
    old_notes_commit = repository.commit_at(repo, ref.target)
    if len(kept) == len(notes) and not old_notes_commit.parent_ids:
        return
    if not kept:
        _git_ok(repo_path, "update-ref", "-d", NOTES_REF, str(ref.target))
        return
    builder = repo.TreeBuilder()
    for commit, blob in kept:
        builder.insert(commit, blob, pygit2.enums.FileMode.BLOB)
    sig = pygit2.Signature("gitmem", "gitmem@localhost", int(time.time()), 0)
    new = repository.commit(
        repo, tree=builder.write(), parent=None, author=sig, message="Notes of rewritten commits are trailers now\n"
    )
    if not repository.compare_and_swap(repo, repository.direct_target(ref), new, ref=NOTES_REF):
        log.warning("refs/notes/gitmem moved while it was being pruned; the next purge retries")


def _drop_obsolete_spools(repo_path: Path, on_main: set[str]) -> None:
    """A push spools its versions (paths included) in ``gitmem/pushes/`` until post-receive settles them.
    A spool of a push made on top of the old history is obsolete: if it landed, its versions are trailers
    now; if it did not, it never will (main is no longer what it was based on)."""
    from gitmem.git.pushes import SPOOL_DIR

    for spool in (repo_path / SPOOL_DIR).glob("*.json"):
        try:
            data = json.loads(spool.read_text())
            old, new = str(data.get("old", "")), str(data.get("new", ""))
        except (OSError, ValueError, AttributeError):
            continue
        if new in on_main or old in on_main or not on_main or set(old) <= {"0"}:
            continue  # made on the current history (or on an empty store): post-receive settles it
        spool.unlink(missing_ok=True)


def _remove_stale_files(repo_path: Path) -> None:
    """Temporary files of crashed packers and importers, and fast-import's crash reports (which quote
    recent commands), and ``.keep`` files fast-import left behind when it died."""
    now = time.time()
    objects = repo_path / "objects"
    candidates = list((objects / "pack").glob("tmp_*")) + list((objects / "pack").glob(".tmp-*"))
    candidates += list(objects.glob("??/tmp_*"))
    candidates += [p for p in (objects / "pack").glob("pack-*.pack") if not p.with_suffix(".idx").exists()]
    for path in candidates:
        with contextlib.suppress(OSError):
            if now - path.lstat().st_mtime > STALE_TEMP_SECONDS:
                path.unlink()
    for path in repo_path.glob("fast_import_crash_*"):
        with contextlib.suppress(OSError):
            path.unlink()
    for keep in (objects / "pack").glob("pack-*.keep"):
        with contextlib.suppress(OSError):
            if keep.read_bytes().startswith(b"fast-import"):
                keep.unlink()


def _wait_for_pushes(repo_path: Path) -> None:
    """A push moves its objects out of quarantine just before it updates the ref; pruning in between
    would delete them. Wait for pushes in flight to finish."""
    deadline = time.monotonic() + PUSH_WAIT_SECONDS
    # receive-pack's quarantine: "incoming-*" in older Git, "tmp_objdir-incoming-*" since 2.x.
    while any((repo_path / "objects").glob("*incoming-*")) and time.monotonic() < deadline:
        time.sleep(0.05)


def _remove_superseded_packs(repo_path: Path) -> None:
    pack_dir = repo_path / "objects" / "pack"
    for path in pack_dir.glob("pack-*"):
        if (
            path.suffix in (".idx", ".rev", ".bitmap", ".mtimes", ".promisor")
            and not path.with_suffix(".pack").exists()
        ):
            with contextlib.suppress(OSError):
                path.unlink()
    kept = [p.name for p in pack_dir.glob("pack-*.keep")]
    if kept:
        log.warning("%s: packs marked .keep survive the purge: %s", repo_path.name, kept)


def _purge_locked(repo_path: Path) -> None:
    """Physically delete every object no ref reaches. The caller holds the writer lock, so no gitmem
    writer is between writing an object and pointing ``main`` at it."""
    with _flock(repo_path / "gitmem" / "pack.lock", timeout=300, what="packing"):
        _delete_ref(repo_path, REWRITE_REF)
        on_main = _on_main(repo_path)
        _prune_notes(repo_path, on_main)
        _drop_obsolete_spools(repo_path, on_main)
        _git_ok(repo_path, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
        _remove_stale_files(repo_path)
        _wait_for_pushes(repo_path)
        _git_ok(repo_path, "repack", "-a", "-d", "-q")
        _checkpoint("after-repack")
        _git_ok(repo_path, "prune", "--expire=now")
        _remove_superseded_packs(repo_path)
        _checkpoint("after-prune")


def _existing(repo_path: Path, oids: Iterable[str]) -> set[str]:
    """Which of ``oids`` can still be read (``git cat-file --batch-check``, i.e. ``cat-file -e``)."""
    oids = sorted(oids)
    if not oids:
        return set()
    out = _git_ok(repo_path, "cat-file", "--batch-check", input=("\n".join(oids) + "\n").encode())
    return {line.split()[0] for line in out.decode().splitlines() if line and not line.endswith(" missing")}


def _reachable_blobs(repo_path: Path) -> set[str]:
    out = _git_ok(repo_path, "rev-list", "--objects", "--all")
    return {line.split()[0] for line in out.decode().splitlines()}


def _verify(repo_path: Path, candidates: set[str], report: RewriteReport) -> None:
    readable = _existing(repo_path, candidates)
    if readable:
        still_used = _reachable_blobs(repo_path) & readable
        report.blobs_shared += sorted(still_used)
        report.blobs_unpurged += sorted(readable - still_used)
    report.blobs_purged += sorted(candidates - readable)
    if report.blobs_unpurged:
        log.error(
            "%s: %d dropped blobs can still be read: %s",
            repo_path.name,
            len(report.blobs_unpurged),
            report.blobs_unpurged[:10],
        )


def _scrub_index(store: MemoryStore) -> None:
    """Bring the index to the new history (a rebuild) and leave no old path in its free pages."""
    if store.index.dialect == "postgresql":
        store.index.catch_up()
        store.index.db.compact()  # rewrites the tables: no dead row keeps the old text
        return
    db = store.index.db
    db.execute("PRAGMA secure_delete=ON")
    store.index.catch_up()
    try:
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except Exception as exc:  # sqlite3.OperationalError: another process holds it; the data is gone anyway
        log.warning("could not compact the index of %s: %s", store.id, exc)


def _finish_pending_purge(store: MemoryStore, report: RewriteReport) -> RewriteReport:
    """Finish the purge of a rewrite that crashed after its swap; the caller holds the rewrite lock."""
    pending = _read_marker(store.path)
    if pending is None:
        return report
    with _writer_lock(store):
        _purge_locked(store.path)
    _scrub_index(store)
    _verify(store.path, pending, report)
    _marker(store.path).unlink(missing_ok=True)
    return report


def _rewrite_lock(store: MemoryStore, timeout: float) -> contextlib.AbstractContextManager[None]:
    return _flock(store.path / "gitmem" / "rewrite.lock", timeout=timeout, what="a history rewrite")


def finish_pending_purge(store: MemoryStore, *, lock_timeout: float = 60.0) -> RewriteReport:
    """Finish the purge of a rewrite that crashed after its swap (no-op when none is pending)."""
    with _rewrite_lock(store, lock_timeout):
        return _finish_pending_purge(store, RewriteReport(store.id))


def purge(store: MemoryStore, *, lock_timeout: float = 60.0) -> RewriteReport:
    """Physically delete whatever is unreachable in a store, now."""
    with _rewrite_lock(store, lock_timeout):
        report = RewriteReport(store.id, bytes_before=objects_size(store.path))
        if _read_marker(store.path) is None:
            _write_marker(store.path, [])
        _finish_pending_purge(store, report)
        report.bytes_after = objects_size(store.path)
        return report


# -- the rewrite ----------------------------------------------------------------------------------


@dataclass
class _Planned:
    """What the plan made of the snapshot: the new history's versions and where each old blob went."""

    snapshot: pygit2.Oid | None
    history: _History
    kept: list[Entry]
    kept_blobs: set[str]  # blobs the new history's trees use
    gone: set[str]  # blobs of old versions that were dropped or changed: to purge unless still used
    blob_map: dict[str, str]  # old blob -> its replacement (a re-encryption)


@contextlib.contextmanager
def _timed(report: RewriteReport, step: str) -> Iterator[None]:
    clock = time.monotonic()
    yield
    report.timings[step] = time.monotonic() - clock


def rewrite_history(
    store: MemoryStore,
    plan: Plan,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    lock_timeout: float = 60.0,
    landed: Callable[[Entry], Entry] | None = None,
) -> RewriteReport:
    """Replay ``main`` through ``plan``, swap it in, and purge what the old history alone held.

    Versions that land while the rewrite runs are replayed on top as they are, or through ``landed``
    (a key rotation re-encrypts them too)."""
    repo_path = store.path
    report = RewriteReport(store.id, dry_run=dry_run)
    with contextlib.nullcontext() if dry_run else _rewrite_lock(store, lock_timeout):
        repo = pygit2.Repository(str(repo_path))
        with _timed(report, "read"):
            report.bytes_before = objects_size(repo_path)
            if not dry_run:
                _delete_ref(repo_path, REWRITE_REF)
            planned = _snapshot_and_plan(repo, plan, report)
        if dry_run:
            report.blobs_shared = sorted(planned.gone & planned.kept_blobs)
            report.blobs_purged = sorted(planned.gone - planned.kept_blobs)  # would be
            report.bytes_after = report.bytes_before
            return report
        if not report.changed:
            with _timed(report, "purge"):
                _finish_pending_purge(store, report)
                report.bytes_after = objects_size(repo_path)
            return report
        with _timed(report, "rebuild"):
            emitter, new_tip = _rebuild(repo_path, repo, planned, progress)
        try:
            _swap_and_purge(store, repo, planned, emitter, new_tip, landed, report)
        except BaseException:
            if report.new_tip is None:  # nothing swapped: forget the new history (the marker stays
                _delete_ref(repo_path, REWRITE_REF)  # harmless; it only asks for a purge)
            raise
        with _timed(report, "index"):
            _scrub_index(store)
        with _timed(report, "verify"):
            _verify_purged(repo_path, planned.gone & emitter.blobs, report)
        return report


def _snapshot_and_plan(repo: pygit2.Repository, plan: Plan, report: RewriteReport) -> _Planned:
    """Read ``main``'s history at its tip now and ask the plan what becomes of every version."""
    snapshot = read_tip(repo)
    history = _History(repo)
    entries = history.read(snapshot, None) if snapshot is not None else []
    decided = plan(entries, history.live())
    if len(decided) != len(entries):
        raise ValueError("a rewrite plan must say what becomes of every version")
    pairs = list(zip(entries, decided, strict=True))
    report.old_tip = str(snapshot) if snapshot is not None else None
    report.versions_before = len(entries)
    report.versions_after = sum(d is not None for d in decided)
    report.dropped = [e.record.version_id for e, d in pairs if d is None]
    report.redacted = [e.record.version_id for e, d in pairs if d is not None and d.redacted and not e.redacted]
    report.changed = any(d is not e for e, d in pairs)
    return _Planned(
        snapshot,
        history,
        [d for d in decided if d is not None],
        kept_blobs={d.blob for d in decided if d is not None and d.blob is not None and d.changes_state},
        gone={e.blob for e, d in pairs if e.blob is not None and (d is None or d.blob != e.blob)},
        blob_map={
            e.blob: d.blob
            for e, d in pairs
            if e.blob is not None and d is not None and d.blob is not None and d.blob != e.blob
        },
    )


def _rebuild(
    repo_path: Path, repo: pygit2.Repository, planned: _Planned, progress: Progress | None
) -> tuple[_Emitter, str]:
    """Write the new history with ``git fast-import`` (no lock held) and check it ends with the same notes."""
    assert planned.snapshot is not None
    emitter = _Emitter(repo_path)
    new_tip = emitter.run(planned.kept, None, progress)
    _check_same_notes(repo, planned.snapshot, new_tip, planned.blob_map)
    _checkpoint("built")
    return emitter, new_tip


def _swap_and_purge(
    store: MemoryStore,
    repo: pygit2.Repository,
    planned: _Planned,
    emitter: _Emitter,
    new_tip: str,
    landed: Callable[[Entry], Entry] | None,
    report: RewriteReport,
) -> None:
    """Under the writer lock: replay what landed since the snapshot, mark what to purge, swap ``main``, purge."""
    repo_path = store.path
    clock = time.monotonic()
    with _writer_lock(store):
        base = planned.snapshot
        for _attempt in range(MAX_SWAP_ATTEMPTS):
            current = read_tip(repo)
            if current is None:
                raise RewriteFailed("main disappeared during the rewrite; nothing was changed")
            if current != base:
                assert base is not None
                new_tip = _replay_landed(repo, planned, emitter, base, current, new_tip, landed, report)
                base = current
            previous = _read_marker(repo_path) or set()
            _write_marker(repo_path, (planned.gone | previous) - emitter.blobs)
            _checkpoint("before-swap")
            if repository.compare_and_swap(repo, base, pygit2.Oid(hex=new_tip)):
                break
        else:
            raise StoreBusy(f"store {store.id} kept changing; its history was not rewritten")
        _checkpoint("after-swap")
        report.new_tip = new_tip
        report.timings["swap"] = time.monotonic() - clock
        clock = time.monotonic()
        _purge_locked(repo_path)
    report.timings["purge"] = time.monotonic() - clock


def _replay_landed(
    repo: pygit2.Repository,
    planned: _Planned,
    emitter: _Emitter,
    base: pygit2.Oid,
    current: pygit2.Oid,
    new_tip: str,
    landed: Callable[[Entry], Entry] | None,
    report: RewriteReport,
) -> str:
    """Put the versions written between ``base`` and ``current`` on top of the new history; its new tip."""
    try:
        arrived = planned.history.read(current, base)
    except _Diverged:
        raise RewriteFailed("main was rewritten by someone else meanwhile; nothing was changed") from None
    replayed = [landed(e) for e in arrived] if landed is not None else arrived
    for old, new in zip(arrived, replayed, strict=True):
        if old.blob is not None and new.blob is not None and new.blob != old.blob:
            planned.blob_map[old.blob] = new.blob
            planned.gone.add(old.blob)
    new_tip = emitter.run(replayed, new_tip)
    _check_same_notes(repo, current, new_tip, planned.blob_map)
    report.replayed += len(arrived)
    report.versions_before += len(arrived)
    report.versions_after += len(arrived)
    return new_tip


def _verify_purged(repo_path: Path, shared: set[str], report: RewriteReport) -> None:
    """Check that every blob the marker names is unreadable now, then drop the marker."""
    pending = _read_marker(repo_path) or set()
    report.blobs_shared = sorted(shared)
    _verify(repo_path, pending, report)
    _marker(repo_path).unlink(missing_ok=True)
    report.bytes_after = objects_size(repo_path)


__all__ = [
    "Entry",
    "Plan",
    "RewriteFailed",
    "RewriteReport",
    "finish_pending_purge",
    "objects_size",
    "purge",
    "rewrite_history",
]
