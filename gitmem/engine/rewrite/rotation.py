"""Key rotation: a new data key, and the whole history re-encrypted under it (docs/architecture.md).

:func:`rotate_store_key` is ``gitmem encryption rotate STORE_ID``:

1. ``keyring.rotate(store)`` adds a new generation (the old ones still decrypt, so nothing is unreadable
   while the rotation runs);
2. :func:`reencrypt_conflicts` re-encrypts the conflicts kept beside ``main``, then :func:`reencrypt_history`
   runs the history-rewriting mechanism (:func:`gitmem.engine.rewrite.rewrite.rewrite_history`) with a
   plan that keeps every version and gives it its blob decoded with the old keys and encoded with the
   new one for its path (AES-SIV, associated data = store id and path); ids, authors, times and trailers
   are kept, versions that land meanwhile are re-encrypted too, and what only the old history held is
   purged in the same run (reflogs, ``repack -a -d``, ``prune --expire=now``, stale packs);
3. every blob left in the repository, reachable or not, is checked to be under the new key (one left
   under an old key gets another pass), and only then are the old generations destroyed
   (``keyring.retire``).

After that the old key reads nothing in the repository. Clones taken before the rotation see a forced
update of ``main`` (the commit ids changed) and keep their old ciphertext, readable only with the key
they were given (``gitmem clone --key``): rotation protects the server's copy, not copies already made.
"""

from __future__ import annotations

import base64
import logging
import secrets
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.crypto.codec import ContentCodec, SivCodec, parse_header
from gitmem.crypto.master_key import KeyMissing
from gitmem.durable import DURABLE, fsync_dir
from gitmem.engine.rewrite.conflicts import rewrite_conflicts
from gitmem.engine.rewrite.history import Entry
from gitmem.engine.rewrite.report import RewriteReport, RewriteWhy
from gitmem.engine.rewrite.rewrite import rewrite_history
from gitmem.errors import GitmemError, InvalidRequest
from gitmem.git import repository
from gitmem.git.rewrite_log import REWRITES_REF
from gitmem.rules.paths import git_path

if TYPE_CHECKING:
    from gitmem.engine.gitmem import Gitmem
    from gitmem.engine.store.store import MemoryStore

log = logging.getLogger(__name__)

MAX_PASSES = 3  # a pass re-encrypts what a concurrent writer still wrote under an old key
MAX_SWAP_ATTEMPTS = 5


class RotationFailed(GitmemError):
    """The rewrite could not be completed or verified; the old keys are kept (nothing is lost)."""


@dataclass(frozen=True)
class RotationReport:
    store_id: str
    old_key_ids: tuple[str, ...]
    new_key_id: str
    versions: int
    blobs_purged: int
    old_tip: str | None
    new_tip: str | None


# -- the re-encryption, as a history rewrite -------------------------------------------------------


def reencryption(store: MemoryStore, old_codec: ContentCodec, new_codec: SivCodec) -> Callable[[Entry], Entry]:
    """What a version becomes: its blob decoded by the old keys and encoded by the new one for its path
    (a blob is bound to its path by AES-SIV's associated data), once per (blob, path). The new blobs are
    flushed whatever the home's durability: the rewritten ``main`` that names them is."""
    done: dict[tuple[str, str], str] = {}
    durable = repository.open_repository(store.path, DURABLE)

    def reencrypt(entry: Entry) -> Entry:
        if entry.blob is None or entry.record.path is None:
            return entry
        tree_path = git_path(entry.record.path)
        key = (entry.blob, tree_path)
        if key not in done:
            data = repository.blob_at(store.repo, entry.blob).data
            header = parse_header(data)
            if header is not None and header.key_id == new_codec.key_id:
                done[key] = entry.blob  # already under the new key (written after the ring rotated)
            else:
                plain = old_codec.decode(tree_path, data) if header is not None else data
                done[key] = str(durable.create_blob(new_codec.encode(tree_path, plain)))
        return replace(entry, blob=done[key])

    return reencrypt


def reencrypt_history(store: MemoryStore, old_codec: ContentCodec, new_codec: SivCodec) -> RewriteReport:
    """Replay ``main`` through the history-rewriting mechanism with every blob re-encrypted; ids, authors,
    times and trailers are kept, versions that land meanwhile are re-encrypted too, and what only the
    old history held is purged in the same run."""
    reencrypt = reencryption(store, old_codec, new_codec)
    why = RewriteWhy("rotation", "the store's data key was rotated: every blob re-encrypted")
    return rewrite_history(store, lambda entries, _live: [reencrypt(e) for e in entries], landed=reencrypt, why=why)


def reencrypt_conflicts(store: MemoryStore, old_codec: ContentCodec, new_codec: SivCodec) -> None:
    """Every conflict's text under the new key (its blob is bound to its path as a note's is); the old
    blobs are left for the purge of the rewrite of ``main`` that follows."""

    def reencode(tree_path: str, data: bytes) -> bytes:
        header = parse_header(data)
        if header is not None and header.key_id == new_codec.key_id:
            return data
        plain = old_codec.decode(tree_path, data) if header is not None else data
        return new_codec.encode(tree_path, plain)

    rewrite_conflicts(store, lambda record: record, reencode=reencode, purge=False)


def blob_key_ids(repo_path: Path) -> dict[str, int]:
    """How many blobs in the repository (reachable or not, loose or packed) each key id encrypted;
    ``"plaintext"`` counts blobs without the gitmem header. The rewrite log's own records (ids and
    times, never content: :mod:`gitmem.git.rewrite_log`) are no note's and are not counted."""
    listing = repository.git(repo_path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    records = repository.git(repo_path, "rev-list", "--objects", "--ignore-missing", REWRITES_REF, "--")
    skipped = (
        {line.split()[0] for line in records.stdout.decode().splitlines() if line} if records.returncode == 0 else set()
    )
    blobs = [
        line.split()[0]
        for line in listing.stdout.decode().splitlines()
        if line.endswith(" blob") and line.split()[0] not in skipped
    ]
    counts: dict[str, int] = {}
    if not blobs:
        return counts
    proc = subprocess.run(  # noqa: S603  an argument list (no shell) of our own
        ["git", "-C", str(repo_path), "cat-file", "--batch"],  # noqa: S607  git from PATH, an argument list (no shell)
        input="\n".join(blobs).encode() + b"\n",
        capture_output=True,
        check=True,
    )
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
    reports: list[RewriteReport] = []
    for _pass in range(MAX_PASSES):
        reencrypt_conflicts(store, old_codec, new_codec)  # purged by the rewrite of main that follows
        reports.append(reencrypt_history(store, old_codec, new_codec))
        stale = _stale(store.path, new_key.key_id)
        if not stale:
            break
        log.info("%s: %s blobs not under the new key after a pass; another pass", store_id, stale)
    else:
        raise RotationFailed(
            "blobs not under the new key remain after the rewrite; the old keys are kept",
            store_id=store_id,
            remaining=stale,
        )
    ring.retire(store_id, keep=[new_key.key_id])
    gm._forget(store_id)
    log.info("rotated the key of %s: %s -> %s", store_id, ",".join(k.key_id for k in old_keys), new_key.key_id)
    return RotationReport(
        store_id,
        tuple(k.key_id for k in old_keys),
        new_key.key_id,
        reports[0].versions_before,
        sum(len(r.blobs_purged) for r in reports),
        reports[0].old_tip,
        reports[-1].new_tip,
    )


__all__ = ["RotationFailed", "RotationReport", "blob_key_ids", "reencrypt_history", "reencryption", "rotate_store_key"]


# -- the master key --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewrapReport:
    keys: int
    old_master_key_id: str
    new_master_key_id: str
    replaced_file: Path | None  # the home's master.key, when that is where the master key lives


def rewrap_master_key(gm: Gitmem, new_key_text: str | None = None) -> RewrapReport:
    """``gitmem encryption rewrap``: every data key wrapped again under a new master key, so the old master
    key opens nothing. Without ``new_key_text`` a new key is generated, which is only possible when the
    master key is the home's ``master.key`` (it is replaced, after the ring: a crash in between leaves
    the new key in ``master.key.new``). With a key from the environment or a key file, point that
    setting at the new key afterwards. Servers must be restarted: they hold the old master key."""
    from gitmem.crypto.master_key import MASTER_KEY_FILENAME, MasterKey, _decode_key_text, _write_private_file

    home_file = gm.home / MASTER_KEY_FILENAME
    in_home = gm.master_key.in_home
    if new_key_text is None and not in_home:
        raise InvalidRequest(
            "the master key comes from $GITMEM_MASTER_KEY or $GITMEM_MASTER_KEY_FILE: give the"
            " new one (--new-key-file) and point that setting at it afterwards"
        )
    keyring = gm.keyring
    old_id = keyring.master.key_id
    if new_key_text is None:
        new_key_text = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii")
    new_master = MasterKey(_decode_key_text(new_key_text))
    if new_master.key_id == old_id:
        raise InvalidRequest("the new master key is the current one")
    staged = home_file.with_name(MASTER_KEY_FILENAME + ".new")
    if in_home:
        staged.unlink(missing_ok=True)
        _write_private_file(staged, new_key_text.encode("ascii") + b"\n")
    count = keyring.rewrap(new_master)
    if in_home:
        staged.replace(home_file)
        fsync_dir(home_file.parent)
    return RewrapReport(count, old_id, new_master.key_id, home_file if in_home else None)
