"""Where an unfinished import is written down: ``HOME/imports/<key>/``, one folder a source.

``state.json`` names the store the import goes into, so that the same import run again (after a
SIGKILL, a lost network, a refused version put right) goes on in that store rather than starting a
new one; a source that must list before it replays (another server's versions) spools its listing
beside it. The folder goes once the import has finished.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
from pathlib import Path

from gitmem.durable import fsync_dir

log = logging.getLogger(__name__)

IMPORTS = "imports"
CRASH_ENV = "GITMEM_IMPORT_CRASH_AT"  # tests only: SIGKILL ourselves once a phase reached a count ("importing:100")


def crash_point(phase: str, done: int) -> None:
    """Where a test kills an import (``GITMEM_IMPORT_CRASH_AT=listing:40``): a real SIGKILL, mid-run."""
    at = os.environ.get(CRASH_ENV)
    if at:
        named, _, count = at.partition(":")
        if named == phase and done >= int(count or 0):
            os.kill(os.getpid(), signal.SIGKILL)


class Journal:
    """The journal of the import of ``source`` (what identifies it across runs: a URL and store id, an
    archive's digest, a folder's path) into the home at ``home``."""

    def __init__(self, home: Path, source: str) -> None:
        self.source = source
        self.folder = home / IMPORTS / hashlib.sha256(source.encode()).hexdigest()[:32]

    @property
    def _state(self) -> Path:
        return self.folder / "state.json"

    def store_id(self) -> str | None:
        """The store an unfinished import of this source went into, if one did."""
        try:
            data = json.loads(self._state.read_text())
        except (OSError, ValueError):
            return None
        found = data.get("store_id") if isinstance(data, dict) else None
        return str(found) if found else None

    def begin(self, store_id: str) -> None:
        """Write down that this source goes into ``store_id`` (flushed: a resumed run must find it)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        temporary = self._state.with_suffix(".tmp")
        with open(temporary, "w") as out:
            json.dump({"store_id": store_id, "source": self.source}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self._state)
        fsync_dir(self.folder)

    def finish(self) -> None:
        """The import is done: forget it (and whatever its source spooled)."""
        shutil.rmtree(self.folder, ignore_errors=True)
