"""Reading ``main``'s history for a rewrite: every version, oldest first, as an :class:`Entry`.

One ``git log`` streams the commits and what each changed; a commit's versions are its trailers, or,
for a commit pushed with plain Git, the versions :func:`gitmem.git.pushes.derive_versions` gives it
against the notes as the replay (:mod:`gitmem.git.replay`) has them just before it, so pushed commits
get the very ids the index derived for them.
"""

from __future__ import annotations

import datetime as dt
import logging
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pygit2

from gitmem.engine.rewrite.locked_git import NO_HOOKS, held_fds
from gitmem.errors import RewriteFailed
from gitmem.git import repository
from gitmem.git.commits import VersionRecord, parse_message
from gitmem.git.pushes import derive_versions
from gitmem.git.replay import Notes
from gitmem.model import Actor
from gitmem.rules import paths

log = logging.getLogger(__name__)


class Diverged(Exception):
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


_LOG_FORMAT = "%x01%H%x00%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd%x00%B"
_TEXT = ("utf-8", "surrogateescape")


def _raw_signature(name: bytes, email: bytes, date: bytes) -> Signature:
    seconds, _, zone = date.decode().partition(" ")
    offset = int(zone[1:3]) * 60 + int(zone[3:5]) if len(zone) == 5 else 0
    return (name.decode(*_TEXT), email.decode(*_TEXT), int(seconds), -offset if zone[:1] == "-" else offset)


def _log_args(repo_path: Path, revisions: str) -> list[str]:
    """``git log --raw -z`` of ``revisions``, first parent first, in the form :func:`_log_commits` reads."""
    return [
        "git",
        "-C",
        str(repo_path),
        *NO_HOOKS,
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


def _log_commits(
    repo_path: Path, revisions: str
) -> Iterator[tuple[str, Signature, Signature, str, dict[str, tuple[int, str, str]]]]:
    """``main``'s commits, first parent first, each with what it changed, streamed from one
    ``git log --raw -z`` (Git walks and diffs; nothing but the current commit is held in memory):
    (commit, author, committer, message, {tree path: (mode, blob, status)})."""
    args = _log_args(repo_path, revisions)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, pass_fds=held_fds())  # noqa: S603  an argument list (no shell) of our own
    assert proc.stdout is not None  # noqa: S101  narrows the type for mypy; never a check of input
    current: list[bytes] | None = None
    changes: dict[str, tuple[int, str, str]] = {}
    pending_header: bytes | None = None

    def finish() -> tuple[str, Signature, Signature, str, dict[str, tuple[int, str, str]]]:
        assert current is not None  # noqa: S101  narrows the type for mypy; never a check of input
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


class History:
    """Walks ``main`` first parent first and turns commits into entries, replaying them on the notes
    (:mod:`gitmem.git.replay`) as the index does."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self.path = Path(repo.path)
        self.seq = 0
        self.notes = Notes()
        self.created: dict[str, dt.datetime] = {}  # memory id -> when its note was first placed

    def read(self, tip: pygit2.Oid, base: pygit2.Oid | None) -> list[Entry]:
        if base is not None and tip != base and not self.repo.descendant_of(tip, base):
            raise Diverged
        entries: list[Entry] = []
        revisions = str(tip) if base is None else f"{base}..{tip}"
        for commit, author, committer, message, changes in _log_commits(self.path, revisions):
            entries += self._entries(commit, author, committer, message, changes)
        return entries

    def live(self) -> frozenset[str]:
        return self.notes.ids()

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
            commit = repository.commit_at(self.repo, commit_id)
            records = derive_versions(self.repo, commit, self.notes.note_at)
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
            step = self.notes.apply(record, in_tree=blob is not None)
            if step is not None and step.path is not None:
                self.created.setdefault(record.memory_id, record.note_created_at)
            out.append(entry)
        return out
