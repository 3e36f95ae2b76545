"""The key ring: each owner's (a user, profile or store id) AES-SIV data keys, stored only wrapped by
the master key (AES-GCM, owner id as associated data) in one file, with every generation kept until
the owner's keys are destroyed.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import secrets
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gitmem.clock import Clock, iso, system_clock
from gitmem.crypto.codec import SivCodec
from gitmem.crypto.master_key import DataKey, KeyMissing, MasterKey
from gitmem.durable import fsync_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyRecord:
    """One generation of an owner's data key, as stored (wrapped) in the key ring."""

    key_id: str
    wrapped: bytes = field(repr=False)
    created_at: str
    master_key_id: str

    def as_json(self) -> dict[str, str]:
        return {
            "key_id": self.key_id,
            "wrapped": base64.b64encode(self.wrapped).decode("ascii"),
            "created_at": self.created_at,
            "master_key_id": self.master_key_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyRecord:
        return cls(
            key_id=data["key_id"],
            wrapped=base64.b64decode(data["wrapped"]),
            created_at=data["created_at"],
            master_key_id=data.get("master_key_id", ""),
        )


class KeyRing:
    """Wrapped data keys by owner, in a small JSON file (mode 0600), newest generation last.

    Every call re-reads the file under an flock, so several processes (server workers, the CLI) can
    share it and a destroy in one is seen by all.
    """

    def __init__(self, path: Path, master: MasterKey, *, clock: Clock = system_clock) -> None:
        self.path = Path(path)
        self.master = master
        self.clock = clock

    # file handling

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _load(self) -> dict[str, list[KeyRecord]]:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        return {owner: [KeyRecord.from_json(r) for r in recs] for owner, recs in data["owners"].items()}

    def _save(self, owners: dict[str, list[KeyRecord]], *, shred_old: bool = False) -> None:
        body = {"version": 1, "owners": {o: [r.as_json() for r in recs] for o, recs in owners.items()}}
        data = json.dumps(body, indent=1, sort_keys=True).encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        old_fd = -1
        try:
            os.write(fd, data)
            os.fsync(fd)
            if shred_old:
                with contextlib.suppress(FileNotFoundError):
                    old_fd = os.open(self.path, os.O_RDWR)
            os.replace(tmp, self.path)  # the new ring is in place before the old one is overwritten
            fsync_dir(self.path.parent)
            if old_fd >= 0:
                # Overwrite the replaced file's blocks (still open) so the destroyed wrapped keys are
                # not left behind in a free inode. Best effort: SSDs and CoW filesystems may keep copies.
                size = os.fstat(old_fd).st_size
                os.pwrite(old_fd, secrets.token_bytes(size), 0)
                os.fsync(old_fd)
                os.ftruncate(old_fd, 0)
        finally:
            os.close(fd)
            if old_fd >= 0:
                os.close(old_fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def _append(self, owners: dict[str, list[KeyRecord]], owner_id: str) -> DataKey:
        data_key, wrapped = self.master.new_data_key(owner_id)
        record = KeyRecord(data_key.key_id, wrapped, iso(self.clock()), self.master.key_id)
        owners.setdefault(owner_id, []).append(record)
        self._save(owners)
        log.info("new data key %s for %s", data_key.key_id, owner_id)
        return data_key

    # queries

    def records(self, owner_id: str) -> list[KeyRecord]:
        with self._locked():
            return list(self._load().get(owner_id, []))

    def has(self, owner_id: str) -> bool:
        return bool(self.records(owner_id))

    def current(self, owner_id: str) -> DataKey:
        """The newest data key of ``owner_id``; :class:`KeyMissing` if none (or destroyed)."""
        recs = self.records(owner_id)
        if not recs:
            raise KeyMissing("no data key for this owner", owner_id=owner_id)
        return self.master.unwrap(owner_id, recs[-1].wrapped)

    def keys(self, owner_id: str) -> list[DataKey]:
        """Every live generation, oldest first."""
        return [self.master.unwrap(owner_id, r.wrapped) for r in self.records(owner_id)]

    def key(self, owner_id: str, key_id: str) -> DataKey:
        for rec in self.records(owner_id):
            if rec.key_id == key_id:
                return self.master.unwrap(owner_id, rec.wrapped)
        raise KeyMissing("no such data key for this owner", owner_id=owner_id, key_id=key_id)

    def codec(self, owner_id: str, store_id: str) -> SivCodec:
        """A codec that writes with the current key and reads every live generation."""
        keys = self.keys(owner_id)
        if not keys:
            raise KeyMissing("no data key for this owner", owner_id=owner_id)
        return SivCodec(keys[-1], store_id, old_keys=keys[:-1])

    # changes

    def ensure(self, owner_id: str) -> DataKey:
        """The current key, created on first use."""
        with self._locked():
            owners = self._load()
            recs = owners.get(owner_id)
            if recs:
                return self.master.unwrap(owner_id, recs[-1].wrapped)
            return self._append(owners, owner_id)

    def rotate(self, owner_id: str) -> DataKey:
        """Add a new current generation. Old ones stay (old blobs still decode) until :meth:`retire`."""
        with self._locked():
            return self._append(self._load(), owner_id)

    def retire(self, owner_id: str, keep: Sequence[str]) -> None:
        """Destroy every generation whose key id is not in ``keep`` (after a re-encrypting rewrite)."""
        with self._locked():
            owners = self._load()
            recs = owners.get(owner_id, [])
            kept = [r for r in recs if r.key_id in keep]
            if len(kept) == len(recs):
                return
            if kept:
                owners[owner_id] = kept
            else:
                owners.pop(owner_id, None)
            self._save(owners, shred_old=True)
            log.info("retired %d data key(s) of %s", len(recs) - len(kept), owner_id)

    def rewrap(self, new_master: MasterKey) -> int:
        """Wrap every data key again under ``new_master`` (one atomic rewrite of the ring; the old file's
        blocks are overwritten). Every key is unwrapped first, so a ring this master cannot fully open
        is left as it was. Returns how many keys were re-wrapped."""
        with self._locked():
            owners = self._load()
            keys = {
                owner: [(rec, self.master.unwrap(owner, rec.wrapped)) for rec in recs] for owner, recs in owners.items()
            }
            rewrapped = {
                owner: [
                    replace(rec, wrapped=new_master.wrap(owner, key), master_key_id=new_master.key_id)
                    for rec, key in pairs
                ]
                for owner, pairs in keys.items()
            }
            self._save(rewrapped, shred_old=True)
            self.master = new_master
        count = sum(len(recs) for recs in rewrapped.values())
        log.info("re-wrapped %d data key(s) under master key %s", count, new_master.key_id)
        return count

    def destroy(self, owner_id: str) -> None:
        """Forget every key of ``owner_id``: overwrite and delete, so no old blob can be decrypted."""
        with self._locked():
            owners = self._load()
            if owners.pop(owner_id, None) is None:
                return
            self._save(owners, shred_old=True)
            log.info("destroyed every data key of %s", owner_id)
