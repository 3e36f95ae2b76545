"""What a backup is on disk: one folder a backup under the destination, and its manifest.

```
DEST/
  gitmem-backup-20261202T140501.123456Z/
    backup.json        the manifest (:class:`Manifest`): when, from where, every store's refs
    catalog.sqlite3    the catalog at one moment (SQLite, whatever the home's database)
    keys.json          the key ring as the home had it: data keys wrapped by the master key
    stores/<id>.bundle one Git bundle a store (its refs: main, conflicts, reviews, push notes)
```

A backup is written as ``.partial-<name>`` and renamed when complete, so a folder with the prefix is
always whole. A store whose refs did not move since the previous backup is a hard link to the previous
bundle (no bytes copied), so every backup stands alone and any of them may be deleted.
The master key is never written into a backup.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitmem.clock import iso
from gitmem.errors import InvalidRequest

PREFIX = "gitmem-backup-"
PARTIAL = ".partial-"
MANIFEST = "backup.json"
CATALOG = "catalog.sqlite3"
KEYS = "keys.json"
FORMAT = 1


@dataclass(frozen=True)
class StoreCopy:
    """One store in a backup: its refs as the bundle holds them (empty: a store with no history yet)."""

    refs: dict[str, str]
    bundle: str | None  # relative to the backup's folder
    size: int  # the bundle's bytes
    copied: bool  # False: a hard link to the previous backup's bundle (its refs had not moved)


@dataclass(frozen=True)
class Manifest:
    id: str
    started_at: str
    finished_at: str
    home: str
    database: str  # the home's catalog engine: sqlite or postgresql
    ledger_seq: int  # the last erasure the catalog copy holds (gitmem.engine.catalog.erasures)
    stores: dict[str, StoreCopy] = field(default_factory=dict)
    keys: bool = False
    master_key: str = "not written"
    format: int = FORMAT

    @property
    def copied_bytes(self) -> int:
        return sum(s.size for s in self.stores.values() if s.copied)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        stores = {k: StoreCopy(**v) for k, v in data.pop("stores", {}).items()}
        return cls(stores=stores, **data)


def backup_name(when: dt.datetime) -> str:
    return PREFIX + when.strftime("%Y%m%dT%H%M%S.%fZ")


def started(manifest: Manifest) -> dt.datetime:
    return dt.datetime.fromisoformat(manifest.started_at.replace("Z", "+00:00"))


def read_manifest(folder: Path) -> Manifest:
    try:
        return Manifest.from_json(json.loads((folder / MANIFEST).read_text("utf-8")))
    except FileNotFoundError:
        raise InvalidRequest(f"{folder} is not a gitmem backup (no {MANIFEST})") from None


def write_manifest(folder: Path, manifest: Manifest) -> None:
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest.as_json(), indent=1, sort_keys=True) + "\n", "utf-8")
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def backups(dest: Path) -> list[Path]:
    """The complete backups under ``dest``, oldest first."""
    if not dest.is_dir():
        return []
    return sorted(p for p in dest.iterdir() if p.name.startswith(PREFIX) and (p / MANIFEST).is_file())


def resolve(src: Path) -> Path:
    """``src`` itself if it is a backup, else the newest backup under it."""
    if (src / MANIFEST).is_file():
        return src
    found = backups(src)
    if not found:
        raise InvalidRequest(f"no gitmem backup at {src}")
    return found[-1]


def now_text(when: dt.datetime) -> str:
    return iso(when)


__all__ = [
    "CATALOG",
    "KEYS",
    "MANIFEST",
    "PARTIAL",
    "PREFIX",
    "Manifest",
    "StoreCopy",
    "backup_name",
    "backups",
    "read_manifest",
    "resolve",
    "started",
    "write_manifest",
]
