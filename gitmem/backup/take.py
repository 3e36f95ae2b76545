"""``gitmem backup DEST``: a consistent backup of a home while it serves (docs/backup.md).

1. The catalog at one moment (:mod:`gitmem.backup.catalog_copy`). The stores the copy lists are the
   ones backed up; a store made after that moment is in the next backup.
2. The key ring as the home has it: data keys wrapped by the master key, less the keys of stores the
   catalog copy no longer lists, and the home's ``allowed_signers`` (public keys). The master key and
   the signing key are never written.
3. Each store's history as a Git bundle of its refs, taken under the store's rewrite lock (no
   retention, redaction or purge deletes objects while the bundle reads them) with the packers held
   off. Writes go on meanwhile: a bundle holds at least every write acknowledged before the backup
   began, and the ledger's rows after the catalog copy (gitmem.engine.catalog.erasures) say what a
   restore must erase again. A store whose refs are those of the previous backup is linked, not copied.
4. The manifest, then the rename that makes the backup whole.

After a backup, every older backup under ``DEST`` loses the wrapped keys of stores deleted since
(:func:`gitmem.backup.prune.forget_destroyed_keys`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gitmem import ids
from gitmem.backup.catalog_copy import snapshot_catalog
from gitmem.backup.layout import (
    CATALOG,
    KEYS,
    PARTIAL,
    Manifest,
    StoreCopy,
    backup_name,
    backups,
    read_manifest,
    write_manifest,
)
from gitmem.backup.prune import forget_destroyed_keys
from gitmem.clock import iso, system_clock
from gitmem.durable import fsync_dir
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.fast_import import REWRITE_REF
from gitmem.engine.rewrite.locked_git import rewrite_lock
from gitmem.errors import GitmemError
from gitmem.git.repository import git, packers_held_off

log = logging.getLogger(__name__)

KEYRING_FILE = "keys.json"  # in the home (gitmem.engine.gitmem.Gitmem.keyring)
SIGNERS_FILE = "allowed_signers"  # public: every signing key the home has had (gitmem.crypto.signing_key)


@dataclass
class BackupReport:
    folder: Path
    manifest: Manifest
    previous: Path | None
    seconds: float = 0.0
    gone: list[str] = field(default_factory=list)  # stores deleted between the catalog copy and their bundle

    @property
    def copied(self) -> list[str]:
        return [k for k, s in self.manifest.stores.items() if s.copied and s.bundle]

    @property
    def unchanged(self) -> list[str]:
        return [k for k, s in self.manifest.stores.items() if not s.copied]


def take_backup(
    gm: Gitmem,
    dest: Path,
    *,
    on_store: Callable[[str, StoreCopy | None], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    lock_timeout: float = 300.0,
    now: Callable[[], dt.datetime] = system_clock,
) -> BackupReport:
    """Back up ``gm`` into a new folder under ``dest``; incremental against the newest backup there.
    ``on_total(n)`` once the store count is known, ``on_store(id, copy)`` after each store."""
    clock = time.monotonic()
    dest = dest.absolute()  # git runs in each store's folder
    dest.mkdir(parents=True, exist_ok=True)
    found = backups(dest)
    previous = found[-1] if found else None
    before = read_manifest(previous) if previous is not None else None
    began = now()
    name = backup_name(began)
    partial = dest / (PARTIAL + name)
    partial.mkdir()
    try:
        snapshot_catalog(gm.database, partial / CATALOG)
        store_ids, ledger_seq = _listed(partial / CATALOG)
        if on_total is not None:
            on_total(len(store_ids))
        keys = _copy_keys(gm.home / KEYRING_FILE, partial / KEYS, set(store_ids))
        if (gm.home / SIGNERS_FILE).is_file():  # so a restored home's old signatures still verify
            shutil.copyfile(gm.home / SIGNERS_FILE, partial / SIGNERS_FILE)
        stores, gone = _copy_stores(gm, partial, store_ids, before, previous, lock_timeout, on_store)
        manifest = Manifest(
            id=name,
            started_at=iso(began),
            finished_at=iso(now()),
            home=str(gm.home),
            database=gm.database.dialect,
            ledger_seq=ledger_seq,
            stores=stores,
            keys=keys,
        )
        folder = _seal(partial, manifest, dest / name)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    forget_destroyed_keys(dest, gm.catalog.erasures)
    log.info("backup %s: %d stores, %d copied", folder, len(stores), len(manifest.stores) - len(gone))
    return BackupReport(folder, manifest, previous, time.monotonic() - clock, gone)


def _copy_stores(
    gm: Gitmem,
    partial: Path,
    store_ids: list[str],
    before: Manifest | None,
    previous: Path | None,
    lock_timeout: float,
    on_store: Callable[[str, StoreCopy | None], None] | None,
) -> tuple[dict[str, StoreCopy], list[str]]:
    """Each store the catalog lists, copied into ``partial/stores`` (incremental against ``previous``);
    and the stores deleted since the catalog was copied."""
    (partial / "stores").mkdir()
    stores: dict[str, StoreCopy] = {}
    gone = []
    for store_id in store_ids:
        prior = before.stores.get(store_id) if before is not None else None
        copy = _copy_store(gm.repo_path(store_id), partial, store_id, prior, previous, lock_timeout)
        if copy is None:
            gone.append(store_id)
        else:
            stores[store_id] = copy
        if on_store is not None:
            on_store(store_id, copy)
    return stores, gone


def _seal(partial: Path, manifest: Manifest, folder: Path) -> Path:
    """The manifest written and everything flushed, then the partial folder renamed to ``folder``: a
    backup under its own name is whole."""
    write_manifest(partial, manifest)
    fsync_dir(partial / "stores")
    fsync_dir(partial)
    os.rename(partial, folder)
    fsync_dir(folder.parent)
    return folder


def _listed(catalog: Path) -> tuple[list[str], int]:
    """The stores the catalog copy lists, and its ledger's last row."""
    db = sqlite3.connect(f"file:{catalog}?mode=ro", uri=True)
    try:
        store_ids = [r[0] for r in db.execute("SELECT id FROM stores ORDER BY created_at, id")]
        (seq,) = db.execute("SELECT coalesce(max(seq), 0) FROM erasures").fetchone()
        return store_ids, int(seq)
    finally:
        db.close()


def _copy_keys(ring: Path, target: Path, stores: set[str]) -> bool:
    """The key ring, wrapped as it is, less the keys of stores the catalog copy does not list."""
    try:
        data = json.loads(ring.read_text("utf-8"))  # replaced whole by its writers: one version of it
    except FileNotFoundError:
        return False
    owners = data.get("owners", {})
    data["owners"] = {o: keys for o, keys in owners.items() if not ids.has_prefix(o, ids.STORE) or o in stores}
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    return True


def _refs(repo: Path) -> dict[str, str]:
    result = git(repo, "for-each-ref", "--format=%(objectname) %(refname)")
    if result.returncode != 0:
        raise GitmemError(f"cannot read the refs of {repo}: {result.stderr.decode(errors='replace').strip()}")
    pairs = (line.split(" ", 1) for line in result.stdout.decode().splitlines() if line)
    return {ref: oid for oid, ref in pairs if ref != REWRITE_REF}


def _copy_store(
    repo: Path, backup: Path, store_id: str, prior: StoreCopy | None, previous: Path | None, lock_timeout: float
) -> StoreCopy | None:
    """One store's bundle (``None``: its repository is gone, the store deleted since the catalog copy)."""
    if not repo.is_dir():
        return None
    relative = f"stores/{store_id}.bundle"
    target = backup / relative
    with rewrite_lock(repo, lock_timeout), packers_held_off(repo, timeout=lock_timeout):
        refs = _refs(repo)
        if not refs:
            return StoreCopy({}, None, 0, True)
        if prior is not None and prior.refs == refs and prior.bundle and previous is not None:
            source = previous / prior.bundle
            if source.is_file():
                _link(source, target)
                return StoreCopy(refs, relative, target.stat().st_size, False)
        _bundle(repo, refs, target, store_id)
    return StoreCopy(bundle_heads(repo, target), relative, target.stat().st_size, True)


def _bundle(repo: Path, refs: dict[str, str], target: Path, store_id: str) -> None:
    """A bundle of exactly ``refs``: made in a scratch repository whose refs are these and whose objects
    are the store's (an alternate), since ``git bundle`` in the store itself drops a ref that a write
    moves while it runs, and writes go on."""
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=target.parent) as scratch:
        frozen = Path(scratch)
        (frozen / "objects" / "info").mkdir(parents=True)
        (frozen / "refs").mkdir()
        (frozen / "HEAD").write_text("ref: refs/heads/main\n")
        (frozen / "objects" / "info" / "alternates").write_text(f"{(repo / 'objects').resolve()}\n")
        (frozen / "packed-refs").write_text("".join(f"{oid} {ref}\n" for ref, oid in sorted(refs.items())))
        made = subprocess.run(  # noqa: S603  an argument list (no shell) of our own
            ["git", "--git-dir", str(frozen), "bundle", "create", "--quiet", str(target), "--stdin"],  # noqa: S607  git from PATH, an argument list (no shell)
            input="".join(f"{ref}\n" for ref in sorted(refs)).encode(),
            capture_output=True,
            check=False,
        )
    if made.returncode != 0:
        raise GitmemError(f"git bundle of {store_id} failed: {made.stderr.decode(errors='replace').strip()}")
    with open(target, "rb") as f:
        os.fsync(f.fileno())


def bundle_heads(repo: Path, bundle: Path) -> dict[str, str]:
    """The refs a bundle holds, as it says."""
    listed = git(repo, "bundle", "list-heads", str(bundle))
    if listed.returncode != 0:
        raise GitmemError(f"{bundle} is not a readable bundle: {listed.stderr.decode(errors='replace').strip()}")
    pairs = (line.split(" ", 1) for line in listed.stdout.decode().splitlines() if line)
    return {ref: oid for oid, ref in pairs}


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or links not allowed: a copy then
        shutil.copyfile(source, target)


__all__ = ["BackupReport", "bundle_heads", "take_backup"]
