"""A throwaway PostgreSQL server for the tests: one cluster a pytest process, a fresh database a test.

:func:`cluster` starts (once per process, so once per xdist worker) a server of its own in a temp
folder: ``initdb`` and ``pg_ctl`` from ``PATH`` or ``/usr/lib/postgresql/*/bin`` (``make postgres``
installs Debian's when they are missing), a unix socket in that folder and TCP on a free 127.0.0.1
port, ``fsync=off`` (nothing here must survive a power cut). As root it runs them as the ``postgres``
user (``initdb`` refuses root). The server is stopped when the process exits.

:meth:`Cluster.fresh_database` makes an empty database for one test (``CREATE DATABASE ... TEMPLATE``,
a file copy of a small template: a few milliseconds) and gives its URL.

:func:`find_binaries` is ``None`` only when no PostgreSQL is installed at all: the one case where the
tests that need it skip (:data:`SKIP_REASON`). A server that is installed but fails to start is an error.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

SKIP_REASON = (
    "PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin);"
    " `make postgres` installs it"
)
TEMPLATE = "gitmem_template"
SUPERUSER = "postgres"


def _has_server(folder: Path) -> bool:
    return all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres"))


def find_binaries() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres`` (newest version first), or ``None``."""
    candidates: list[Path] = []
    for name in ("pg_ctl", "initdb"):
        found = shutil.which(name)
        if found:
            candidates.append(Path(os.path.realpath(found)).parent)
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += [Path(p) for p in sorted(versions, key=lambda p: int(Path(p).parent.name or 0), reverse=True)]
    return next((c for c in candidates if _has_server(c)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    bindir: Path
    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @property
    def _options(self) -> str:
        return (
            f"-c port={self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.socket_dir}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            " -c shared_buffers=32MB"
        )

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    def start(self) -> None:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, SUPERUSER, SUPERUSER)
            shutil.chown(self.socket_dir, SUPERUSER, SUPERUSER)
        done = self._run(
            "initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"
        )
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        log = self.root / "server.log"
        done = self._run("pg_ctl", "-D", str(self.data), "-o", self._options, "-l", str(log), "-w", "-t", "60", "start")
        if done.returncode:
            text = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr or done.stdout}\n{text[-2000:]}")
        self.sql(f"CREATE DATABASE {TEMPLATE}")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def pause(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data, as an outage would (a fast shutdown: clients are cut off;
        ``immediate``: a crash, every backend killed at once)."""
        done = self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")
        if done.returncode:
            raise RuntimeError(f"pg_ctl stop failed: {done.stderr or done.stdout}")

    def resume(self) -> None:
        """Start the paused server again, on the same port with the same data."""
        log = self.root / "server.log"
        done = self._run("pg_ctl", "-D", str(self.data), "-o", self._options, "-l", str(log), "-w", "-t", "60", "start")
        if done.returncode:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr or done.stdout}")

    def sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(statement)

    _names = itertools.count(1)

    def fresh_database(self) -> str:
        """An empty database of its own (its URL)."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.sql(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return self.url(name)


_cluster: Cluster | None = None
_guard = threading.Lock()


def cluster() -> Cluster | None:
    """This process's server, started on first use; ``None`` if PostgreSQL is not installed."""
    global _cluster
    with _guard:
        if _cluster is None:
            bindir = find_binaries()
            if bindir is None:
                return None
            root = Path(tempfile.mkdtemp(prefix="gitmem-pg-"))
            os.chmod(root, 0o755)  # noqa: S103  the postgres user must reach its data folder
            for attempt in range(3):  # a free port may be taken between the probe and the start
                found = Cluster(bindir, root / f"c{attempt}", _free_port())
                try:
                    found.start()
                except RuntimeError:
                    found.stop()
                    if attempt == 2:
                        raise
                    continue
                _cluster = found
                break
            atexit.register(_stop, root)
        return _cluster


def _stop(root: Path) -> None:
    if _cluster is not None:
        _cluster.stop()
    shutil.rmtree(root, ignore_errors=True)
