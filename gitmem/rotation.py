"""Key rotation: a new data key, and the whole history re-encrypted under it (DESIGN sections 7 and 10).

:func:`rotate_store_key` is ``gitmem keys rotate STORE_ID``:

1. ``keyring.rotate(store)`` adds a new generation (the old ones still decrypt, so nothing is unreadable
   while the rotation runs);
2. :func:`reencrypt_history` replays ``main``'s commits onto new ones whose blobs are decoded with the
   old keys and encoded with the new one for the path they sit at (AES-SIV, associated data = store id
   and path), keeping parents, authors, committers, times and messages; commits pushed with plain Git
   get their version ids written as trailers, so every version keeps its id. ``main`` is swapped under
   the store's writer lock with a compare-and-swap;
3. :func:`gitmem.rewrite.purge` (the history-rewriting module's physical deletion) removes what only the
   old history reached: reflogs, ``repack -a -d``, ``prune --expire=now``, stale packs; the index is
   rebuilt and compacted;
4. every blob left in the repository, reachable or not, is checked to be under the new key (a write that
   landed with an old key meanwhile gets another pass), and only then are the old generations destroyed
   (``keyring.retire``).

(:func:`gitmem.rewrite.rewrite_history` replays versions through a plan, but it refuses any plan whose
new history ends with other blobs than ``main``, which a re-encryption always does; so the replay is
here and only the purge is shared.)

After that the old key reads nothing in the repository. Clones taken before the rotation see a forced
update of ``main`` (the commit ids changed) and keep their old ciphertext, readable only with the key
they were given (``gitmem clone --key``): rotation protects the server's copy, not copies already made.
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from gitmem import repository
from gitmem.commits import parse_message, trailers
from gitmem.crypto import ContentCodec, KeyMissing, SivCodec, parse_header
from gitmem.errors import GitmemError, InvalidRequest, StoreBusy
from gitmem.index import VersionRow
from gitmem.repository import NOTES_REF

if TYPE_CHECKING:
    from gitmem.home import Gitmem
    from gitmem.store import MemoryStore

log = logging.getLogger(__name__)

MAX_PASSES = 3  # a pass re-encrypts what a concurrent writer still wrote under an old key
MAX_SWAP_ATTEMPTS = 5


class RotationFailed(GitmemError):
    """The rewrite could not be completed or verified; the old keys are kept (nothing is lost)."""


@dataclass(frozen=True)
class Replay:
    old_tip: str | None
    new_tip: str | None
    commits: int
    reencrypted: int


@dataclass(frozen=True)
class RotationReport:
    store_id: str
    old_key_ids: tuple[str, ...]
    new_key_id: str
    commits: int
    blobs_reencrypted: int
    blobs_purged: int
    old_tip: str | None
    new_tip: str | None


# -- the replay -------------------------------------------------------------------------------------


class _Replayer:
    """Rewrites trees (and the blobs in them) once per (object, path): a blob is bound to its path."""

    def __init__(self, repo: pygit2.Repository, old_codec: ContentCodec, new_codec: SivCodec) -> None:
        self.repo = repo
        self.old_codec = old_codec
        self.new_codec = new_codec
        self._blobs: dict[tuple[pygit2.Oid, str], pygit2.Oid] = {}
        self._trees: dict[tuple[pygit2.Oid, str], pygit2.Oid] = {}

    @property
    def reencrypted(self) -> int:
        return sum(1 for (old, _path), new in self._blobs.items() if old != new)

    def blob(self, oid: pygit2.Oid, tree_path: str) -> pygit2.Oid:
        key = (oid, tree_path)
        done = self._blobs.get(key)
        if done is None:
            data = self.repo[oid].data
            header = parse_header(data)
            if header is not None and header.key_id == self.new_codec.key_id:
                done = oid  # already under the new key (written after the ring rotated)
            else:
                plain = self.old_codec.decode(tree_path, data) if header is not None else data
                done = self.repo.create_blob(self.new_codec.encode(tree_path, plain))
            self._blobs[key] = done
        return done

    def tree(self, oid: pygit2.Oid, prefix: str = "") -> pygit2.Oid:
        key = (oid, prefix)
        done = self._trees.get(key)
        if done is None:
            builder = self.repo.TreeBuilder()
            for entry in self.repo[oid]:
                if entry.type_str == "tree":
                    builder.insert(entry.name, self.tree(entry.id, f"{prefix}{entry.name}/"), entry.filemode)
                elif entry.type_str == "blob":
                    builder.insert(entry.name, self.blob(entry.id, prefix + entry.name), entry.filemode)
                else:
                    raise RotationFailed(f"unexpected {entry.type_str} at {prefix}{entry.name} in a store's tree")
            done = self._trees[key] = builder.write()
        return done


def _message(commit: pygit2.Commit, by_commit: dict[str, list[VersionRow]]) -> str:
    """The commit's message; a pushed commit (no trailers) gets its versions appended as trailers, as the
    index knows them (from the push's Git note, or derived from the commit id), so they keep their ids."""
    message = commit.message
    if parse_message(message):
        return message
    rows = by_commit.get(str(commit.id), [])
    if not rows:
        return message
    blocks = ["\n".join(f"{k}: {v}" for k, v in trailers(row.record)) for row in rows]
    return message.rstrip("\n") + "\n\n" + "\n\n".join(blocks) + "\n"


def reencrypt_history(store: MemoryStore, old_codec: ContentCodec, new_codec: SivCodec) -> Replay:
    """Replay ``main`` with every blob decoded by ``old_codec`` and encoded by ``new_codec``; swap ``main``.

    Commit by commit, same parents, authors, committers, times and messages (pushed commits gain their
    trailers). Runs under the store's writer lock (API writes wait); a push that moves ``main`` meanwhile
    makes the replay start again from the new tip (rewritten objects are reused). Nothing is deleted
    here: :func:`gitmem.rewrite.purge` does that.
    """
    repo = store.repo
    with repository.writer_lock(store.path, timeout=60.0):
        replayer = _Replayer(repo, old_codec, new_codec)
        for _attempt in range(MAX_SWAP_ATTEMPTS):
            tip = repository.read_tip(repo)
            if tip is None:
                return Replay(None, None, 0, 0)
            store.index.catch_up()
            by_commit: dict[str, list[VersionRow]] = {}
            for row in store.index.all_versions():
                by_commit.setdefault(row.commit_id, []).append(row)
            mapping: dict[pygit2.Oid, pygit2.Oid] = {}
            for commit in repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE):
                parents = [mapping[p] for p in commit.parent_ids]
                mapping[commit.id] = repo.create_commit(None, commit.author, commit.committer,
                                                        _message(commit, by_commit),
                                                        replayer.tree(commit.tree_id), parents)
            if repository.compare_and_swap(repo, tip, mapping[tip]):
                notes = repo.references.get(NOTES_REF)
                if notes is not None:  # they name the old commits; their versions are trailers now
                    notes.delete()
                store.index.rebuild()
                return Replay(str(tip), str(mapping[tip]), len(mapping), replayer.reencrypted)
            log.info("main of %s moved during the rewrite; replaying again", store.id)
    raise StoreBusy(f"store {store.id} kept changing; the history was not re-encrypted")


def blob_key_ids(repo_path: Path) -> dict[str, int]:
    """How many blobs in the repository (reachable or not, loose or packed) each key id encrypted;
    ``"plaintext"`` counts blobs without the gitmem header."""
    listing = repository.git(repo_path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    blobs = [line.split()[0] for line in listing.stdout.decode().splitlines() if line.endswith(" blob")]
    counts: dict[str, int] = {}
    if not blobs:
        return counts
    proc = subprocess.run(["git", "-C", str(repo_path), "cat-file", "--batch"], input="\n".join(blobs).encode() + b"\n",
                          capture_output=True, check=True)
    out, pos = proc.stdout, 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        _oid, _type, size = out[pos:end].split()
        body = out[end + 1 : end + 1 + int(size)]
        pos = end + 1 + int(size) + 1
        header = parse_header(body)
        key = header.key_id if header else "plaintext"
        counts[key] = counts.get(key, 0) + 1
    return counts


# -- the whole rotation -----------------------------------------------------------------------------


def _stale(repo_path: Path, key_id: str) -> dict[str, int]:
    return {k: n for k, n in blob_key_ids(repo_path).items() if k != key_id}


def rotate_store_key(gm: Gitmem, store_id: str) -> RotationReport:
    """Rotate an encrypted store's data key and re-encrypt its whole history under the new one."""
    info = gm.catalog.store(store_id)
    if not info.encrypted:
        raise InvalidRequest(f"memory store {store_id} is not encrypted: it has no key to rotate")
    ring = gm.keyring
    old_keys = ring.keys(store_id)
    if not old_keys:
        raise KeyMissing("this store has no data key", owner_id=store_id)
    new_key = ring.rotate(store_id)
    old_codec = SivCodec(old_keys[-1], store_id, old_keys=old_keys[:-1])
    new_codec = SivCodec(new_key, store_id)
    gm._forget(store_id)  # this thread's cached store has the old codec
    store = gm.store(info.workspace_id, store_id)
    from gitmem.rewrite import purge

    first: Replay | None = None
    reencrypted = purged = 0
    for _pass in range(MAX_PASSES):
        replay = reencrypt_history(store, old_codec, new_codec)
        first = first or replay
        reencrypted += replay.reencrypted
        cleanup = purge(store)  # reflogs, repack -a -d, prune, stale packs; the index rebuilt and compacted
        purged += len(cleanup.blobs_purged)
        stale = _stale(store.path, new_key.key_id)
        if not stale:
            break
        log.info("%s: %s blobs not under the new key after a pass; another pass", store_id, stale)
    else:
        raise RotationFailed("blobs not under the new key remain after the rewrite; the old keys are kept",
                             store_id=store_id, remaining=stale)
    ring.retire(store_id, keep=[new_key.key_id])
    gm._forget(store_id)
    log.info("rotated the key of %s: %s -> %s", store_id, ",".join(k.key_id for k in old_keys), new_key.key_id)
    assert first is not None
    return RotationReport(store_id, tuple(k.key_id for k in old_keys), new_key.key_id, first.commits,
                          reencrypted, purged, first.old_tip, replay.new_tip or first.new_tip)


__all__ = ["Replay", "RotationFailed", "RotationReport", "blob_key_ids", "reencrypt_history", "rotate_store_key"]
