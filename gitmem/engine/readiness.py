"""Whether this node can take work: what ``/readyz`` asks (docs/deploy.md, "Readiness").

Ready means the catalog answers (SQLite, or PostgreSQL through the same pool requests use), and the
home takes a write with room to spare: a file can be created, written, flushed and removed there, and
its file system has at least ``min_free_bytes`` free. Liveness (``/healthz``) asks none of this: a node
whose database is down is alive and should not be restarted, only taken out of rotation.

Every check answers within ``timeout`` seconds: a load balancer probes often and must not pile up
waiting requests behind a PostgreSQL that stopped answering. A catalog check still waiting from an
earlier probe is not started again; the probe says the catalog is not answering.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from gitmem.db import Database

PROBE_FILE = ".ready-probe"


@dataclass(frozen=True)
class Check:
    name: str  # "catalog", "home" or "disk"
    ok: bool
    reason: str = ""  # why not, for the operator; never a path, a URL or a secret


@dataclass(frozen=True)
class Readiness:
    checks: tuple[Check, ...]

    @property
    def ready(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def failing(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if not check.ok)


@dataclass(frozen=True)
class DiskSpace:
    free_bytes: int  # what an unprivileged process may still write
    total_bytes: int


def disk_space(path: Path) -> DiskSpace:
    usage = shutil.disk_usage(path)
    return DiskSpace(usage.free, usage.total)


class ReadinessProbe:
    """The checks of one node's home and catalog; thread-safe, one catalog check in flight at a time."""

    def __init__(self, database: Database, home: Path, *, min_free_bytes: int, timeout: float = 2.0) -> None:
        self.database = database
        self.home = home
        self.min_free_bytes = min_free_bytes
        self.timeout = timeout
        self._asker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gitmem-ready")
        self._pending: concurrent.futures.Future[object] | None = None

    def check(self) -> Readiness:
        return Readiness((self.check_catalog(), self.check_home(), self.check_disk()))

    def check_catalog(self) -> Check:
        pending = self._pending
        if pending is not None and not pending.done():
            return Check("catalog", False, "not answering (an earlier check is still waiting)")
        # One thread asks, always the same: it keeps its own connection (SQLite's are per thread).
        self._pending = pending = self._asker.submit(lambda: self.database.execute("SELECT 1").fetchone())
        try:
            pending.result(self.timeout)
        except concurrent.futures.TimeoutError:
            return Check("catalog", False, f"not answering within {self.timeout:g} s")
        except Exception as exc:  # any failure to answer is "not ready", whatever the driver raised
            return Check("catalog", False, f"unreachable ({type(exc).__name__})")
        return Check("catalog", True)

    def close(self) -> None:
        self._asker.shutdown(wait=False, cancel_futures=True)

    def check_home(self) -> Check:
        """A write that reaches the disk: a file created, written, flushed and removed."""
        probe = self.home / f"{PROBE_FILE}-{os.getpid()}-{threading.get_ident()}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, b"ready\n")
                os.fsync(fd)
            finally:
                os.close(fd)
                probe.unlink(missing_ok=True)
        except OSError as exc:
            return Check("home", False, f"not writable ({os.strerror(exc.errno) if exc.errno else type(exc).__name__})")
        return Check("home", True)

    def check_disk(self) -> Check:
        try:
            space = disk_space(self.home)
        except OSError as exc:
            return Check("disk", False, f"cannot be measured ({type(exc).__name__})")
        if space.free_bytes < self.min_free_bytes:
            return Check("disk", False, f"{space.free_bytes} bytes free, under the {self.min_free_bytes} required")
        return Check("disk", True)
