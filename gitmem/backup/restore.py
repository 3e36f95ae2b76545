"""``gitmem restore SRC --home NEW``: a home rebuilt from a backup (docs/backup.md).

Into an empty folder (and, on PostgreSQL, an empty database) only: a restore never merges into a home.
In order, before the restored home can serve:

1. the catalog (:func:`gitmem.backup.catalog_copy.restore_catalog`), the key ring and the record of
   the home's signing keys (``allowed_signers``), as the backup holds them (the signing key itself is
   the home's own, given as for ``gitmem serve``, else a new one is made and recorded beside the old);
   the master key is the home's own, given as for ``gitmem serve`` (``GITMEM_MASTER_KEY`` or
   ``GITMEM_MASTER_KEY_FILE``) or copied in with ``--master-key-file``: a backup never holds it;
2. each store's repository from its bundle, made as ``gitmem store create`` makes one (its hooks,
   its settings), every ref the bundle holds;
3. every erasure made after the backup, erased again, and every key revoked since, revoked again
   (:mod:`gitmem.backup.erase_again`);
4. each store's index rebuilt from its history, then ``gitmem fsck``'s checks of every store.

``RESTORING`` in the new home marks a restore that has not finished (a crash): remove the home and
restore again.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitmem.backup.catalog_copy import restore_catalog
from gitmem.backup.erase_again import ErasedAgain, Later, erase_again, later_catalogs
from gitmem.backup.layout import CATALOG, KEYS, Manifest, read_manifest, resolve
from gitmem.crypto.master_key import MasterKeySource
from gitmem.crypto.signing_key import SigningKeySource
from gitmem.db import open_database
from gitmem.durable import FsyncMode
from gitmem.engine.fsck import check_home_store, orphan_folders
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.locked_git import NO_HOOKS
from gitmem.errors import Conflict, GitmemError, InvalidRequest
from gitmem.git import repository

log = logging.getLogger(__name__)

MARKER = "RESTORING"
MASTER_KEY_FILE = "master.key"
SIGNERS_FILE = "allowed_signers"


@dataclass
class RestoreReport:
    home: Path
    backup: Path
    manifest: Manifest
    stores: int = 0
    erased: ErasedAgain = field(default_factory=ErasedAgain)
    problems: dict[str, list[str]] = field(default_factory=dict)  # fsck's, by store
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems and not self.erased.problems


def restore_home(
    src: Path,
    home: Path,
    *,
    database: str | None = None,
    master_key: MasterKeySource | None = None,
    master_key_file: Path | None = None,
    signing_key: SigningKeySource | None = None,
    erasures_from: Sequence[str | Path] = (),
    fsync: FsyncMode = "always",
    on_store: Callable[[str], None] | None = None,
) -> RestoreReport:
    """Rebuild a home at ``home`` from the backup at ``src`` (a backup, or a destination: its newest)."""
    clock = time.monotonic()
    home = home.absolute()
    backup = resolve(src.absolute())  # git runs in each store's folder
    manifest = read_manifest(backup)
    report = RestoreReport(home, backup, manifest)
    _refuse_non_empty(home)
    if _has_encrypted(backup) and master_key_file is None and not _given(master_key):
        raise InvalidRequest(
            "the backup holds encrypted stores and no backup holds the master key: give the home's key"
            " with --master-key-file (or GITMEM_MASTER_KEY / GITMEM_MASTER_KEY_FILE)"
        )
    source_home = Path(manifest.home)
    later = later_catalogs(backup, source_home if source_home != home else None, erasures_from)
    home.mkdir(parents=True, exist_ok=True)
    (home / MARKER).write_text("a restore into this home has not finished\n")
    _copy_back(backup, home, manifest, database=database, master_key_file=master_key_file, on_store=on_store)
    gm = Gitmem.open(home, database=database, master_key=master_key, signing_key=signing_key, fsync=fsync)
    try:
        _settle(gm, manifest, later, report)
    finally:
        gm.close()
    if report.ok:
        (home / MARKER).unlink()
    report.seconds = time.monotonic() - clock
    return report


def _copy_back(
    backup: Path,
    home: Path,
    manifest: Manifest,
    *,
    database: str | None,
    master_key_file: Path | None,
    on_store: Callable[[str], None] | None,
) -> None:
    """The catalog (into ``database``, if given), the key ring, the master key given, the signers'
    file and every store's repository, from the backup into ``home``."""
    target_db = open_database(database, home / CATALOG) if database else None
    try:
        restore_catalog(backup / CATALOG, home, target_db)
    finally:
        if target_db is not None:
            target_db.close()
    if (backup / KEYS).is_file():
        _private_copy(backup / KEYS, home / KEYS)
    if master_key_file is not None:
        _private_copy(master_key_file, home / MASTER_KEY_FILE)
    if (backup / SIGNERS_FILE).is_file():  # the old keys' lines: the restored history still verifies
        shutil.copyfile(backup / SIGNERS_FILE, home / SIGNERS_FILE)
    (home / "stores").mkdir(exist_ok=True)
    for store_id, copy in manifest.stores.items():
        repo = home / "stores" / f"{store_id}.git"
        repository.init_bare(repo)
        if copy.bundle is not None:
            _unbundle(repo, backup / copy.bundle)
        if on_store is not None:
            on_store(store_id)


def _settle(gm: Gitmem, manifest: Manifest, later: Later, report: RestoreReport) -> None:
    """The restored home made consistent and checked: the stores deleted while the backup ran go, what
    was erased since is erased again, each store's index caught up and checked, and folders no store
    owns reported."""
    for info in gm.all_stores():
        if info.id not in manifest.stores:  # deleted while the backup ran: its row and key go too
            gm.delete_store(info.workspace_id, info.id, force=True)
    report.erased = erase_again(gm, later)
    for info in gm.all_stores():
        with gm.leases():  # one store open at a time, however many there are
            gm.store(info.workspace_id, info.id).index.catch_up()
        result = check_home_store(gm, info)
        report.stores += 1
        if not result.ok:
            report.problems[info.id] = result.problems
    for orphan in orphan_folders(gm):
        report.problems[orphan.name] = ["no store in the catalog owns this folder"]


def _refuse_non_empty(home: Path) -> None:
    if home.exists() and (not home.is_dir() or any(home.iterdir())):
        raise Conflict(f"{home} is not empty: a backup is restored into a new, empty home only")


def _given(source: MasterKeySource | None) -> bool:
    return source is not None and (source.text is not None or source.file is not None)


def _has_encrypted(backup: Path) -> bool:
    db = sqlite3.connect(f"file:{backup / CATALOG}?mode=ro", uri=True)
    try:
        return bool(db.execute("SELECT count(*) FROM stores WHERE encrypted != 0").fetchone()[0])
    finally:
        db.close()


def _private_copy(source: Path, target: Path) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out, open(source, "rb") as f:
        shutil.copyfileobj(f, out)
        out.flush()
        os.fsync(out.fileno())


def _unbundle(repo: Path, bundle: Path) -> None:
    """Every ref of ``bundle`` into the new repository ``repo``."""
    result = repository.git(repo, *NO_HOOKS, "fetch", "--quiet", "--no-write-fetch-head", str(bundle), "+refs/*:refs/*")
    if result.returncode != 0:
        raise GitmemError(f"{bundle} could not be restored: {result.stderr.decode(errors='replace').strip()}")


__all__ = ["MARKER", "RestoreReport", "restore_home"]
