"""Writing a rewrite's new history with ``git fast-import``: one commit per kept version, on
:data:`REWRITE_REF`, its trailers, author and times as they were.

Each new tree is the previous new tree changed by that version as the one replay rule says
(:mod:`gitmem.git.replay`): a created or modified version sets its note's path to its blob (leaving
its old path, and pushing out a note left in its way by a redaction), a deleted one removes it, a
redacted one changes no tree and names no path. The new history must end with the notes the old one
has (:func:`check_same_notes`).
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import pygit2

from gitmem.durable import fsync_dir
from gitmem.engine.rewrite.history import Entry, Signature
from gitmem.engine.rewrite.locked_git import NO_HOOKS, git, held_fds
from gitmem.errors import RewriteFailed
from gitmem.git import repository
from gitmem.git.commits import format_message
from gitmem.git.pack.format import write_pack
from gitmem.git.replay import Notes
from gitmem.git.signing import Signer, sign_chain
from gitmem.rules import paths

log = logging.getLogger(__name__)

REWRITE_REF = "refs/gitmem/rewrite"
_TEXT = ("utf-8", "surrogateescape")
Progress = Callable[[int, int], None]


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


class NewHistory:
    """Builds the new history with ``git fast-import`` on :data:`REWRITE_REF`; remembers where each
    note sits in the new tree across runs (the landed commits are a second run)."""

    def __init__(self, repo_path: Path, signer: Signer | None = None) -> None:
        self.repo_path = repo_path
        self.signer = signer  # fast-import signs nothing: its commits are signed anew (see run)
        self.notes = Notes()  # the new tree's notes
        self.blobs: set[str] = set()  # every blob the new history references
        self.commits = 0

    def _changes(self, entry: Entry) -> list[bytes]:
        """The fast-import file changes of one version. A note pushed out of the way needs none:
        fast-import replaces a file by a folder (and a folder by a file) where a path needs it."""
        before = self.notes.path_of(entry.record.memory_id)
        step = self.notes.apply(entry.record, in_tree=entry.blob is not None)
        if step is None:
            return []
        if step.path is None:
            return [b"D " + _quote(paths.git_path(before))] if before is not None else []
        assert entry.blob is not None  # a note is placed only with its blob  # noqa: S101  narrows the type for mypy; never a check of input
        out = []
        if before is not None and before != step.path:
            out.append(b"D " + _quote(paths.git_path(before)))
        out.append(b"M %o %s " % (entry.mode or 0o100644, entry.blob.encode()) + _quote(paths.git_path(step.path)))
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
        # Whatever the home's durability: a rewrite is rare, and its crash safety rests on the new pack.
        args = ["git", "-C", str(self.repo_path), *NO_HOOKS, "-c", "fastimport.unpackLimit=0"]
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(  # noqa: S603  an argument list (no shell) of our own
                [*args, "fast-import", "--quiet", "--done", "--force"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                pass_fds=held_fds(),
            )
            assert proc.stdin is not None  # noqa: S101  narrows the type for mypy; never a check of input
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
        for sub in ("objects/pack", "refs/gitmem"):
            with contextlib.suppress(OSError):
                fsync_dir(self.repo_path / sub)
        result = git(self.repo_path, "rev-parse", "--verify", REWRITE_REF)
        tip = result.stdout.decode().strip()
        return self._signed(parent, tip) if self.signer is not None else tip

    def _signed(self, parent: str | None, tip: str) -> str:
        """The commits fast-import just wrote after ``parent``, signed anew into one pack, and
        :data:`REWRITE_REF` moved onto the signed line."""
        assert self.signer is not None  # noqa: S101  narrows the type for mypy; never a check of input
        repo = pygit2.Repository(str(self.repo_path))
        new_tip, objects = sign_chain(repo, parent, tip, self.signer)
        write_pack(self.repo_path / "objects", objects)
        if not repository.compare_and_swap(repo, pygit2.Oid(hex=tip), pygit2.Oid(hex=new_tip), ref=REWRITE_REF):
            raise RewriteFailed(f"{REWRITE_REF} moved while the rewrite signed it; nothing was changed")
        return new_tip


def _flatten(repo: pygit2.Repository, oid: pygit2.Oid | str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    if oid is None:
        return out

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for item in tree:
            assert item.name is not None  # a tree's entries are named; only looked-up objects are not  # noqa: S101  narrows the type for mypy; never a check of input
            if item.type_str == "tree":
                walk(repository.tree_at(repo, item.id), prefix + item.name + "/")
            else:
                out[prefix + item.name] = str(item.id)

    walk(repository.commit_at(repo, oid).tree, "")
    return out


def check_same_notes(repo: pygit2.Repository, old: pygit2.Oid, new: str, blob_map: dict[str, str]) -> None:
    """The new history must end with the notes ``old`` has (blobs a plan replaced, e.g. re-encrypted
    ones, mapped through ``blob_map``)."""
    before = {path: blob_map.get(blob, blob) for path, blob in _flatten(repo, old).items()}
    after = _flatten(repo, new)
    if before != after:
        differ = sorted(set(before.items()) ^ set(after.items()))
        log.error("rewritten history of %s ends with other notes than main: %s", repo.path, differ[:10])
        raise RewriteFailed("the rewritten history would change the store's current notes; nothing was changed")
