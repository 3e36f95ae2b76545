"""A real uvicorn server on 127.0.0.1 for tests: ``with serve(home) as base_url: ...``.

Not a fixture module: test modules wrap :func:`serve` in their own fixtures (tests/conftest.py
belongs to the suite as a whole).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from tests import REPO_ROOT


@dataclass(frozen=True)
class RealServer:
    """A real uvicorn on 127.0.0.1 serving ``home``."""

    home: Path
    base_url: str


# Background jobs and the rate limit off; fsync off (durability is proved without a server).
REAL_SERVER_ENV = {
    "GITMEM_RATE_LIMIT_RPS": "0",
    "GITMEM_DREAM_RUNNER": "off",
    "GITMEM_PRUNE_INTERVAL": "0",
    "GITMEM_WEBHOOKS": "off",
    "GITMEM_FSYNC": "never",
}


class ServerFailed(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def serve(
    home: Path | str,
    *,
    env: Mapping[str, str] | None = None,
    app: str = "gitmem.api.app:create_app_from_env",
    startup_timeout: float = 60.0,
    attempts: int = 3,
    prefix: Sequence[str] = (),
    started: list[subprocess.Popen[bytes]] | None = None,
) -> Iterator[str]:
    """Start ``uvicorn --factory app`` in a subprocess serving ``home``; yield its base URL; stop it.

    ``env`` adds to (or overrides) the environment, e.g. ``{"GITMEM_RATE_LIMIT_RPS": "1"}``. The port
    is picked free and retried if another process takes it first. ``prefix``: a command that execs
    the server (``prlimit --nofile=256:256 --``); ``started`` gets the server's process.
    """
    last_error: Exception | None = None
    for _ in range(attempts):
        with tempfile.TemporaryFile() as log_file:
            port = free_port()
            proc = _start(home, port, app, env, log_file, prefix)
            if started is not None:
                started.append(proc)
            base_url = f"http://127.0.0.1:{port}"
            try:
                _wait_healthy(proc, base_url, startup_timeout, log_file)
            except ServerFailed as exc:
                last_error = exc
                _stop(proc)
                continue
            try:
                yield base_url
            finally:
                _stop(proc)
                output = _tail(log_file, limit=20_000)
                if output.strip():  # warnings and tracebacks: pytest shows them with a failure
                    sys.stderr.write(f"--- uvicorn output for {base_url} ---\n{output}\n")
            return
    raise ServerFailed(f"uvicorn did not start after {attempts} attempts") from last_error


def _start(
    home: Path | str,
    port: int,
    app: str,
    env: Mapping[str, str] | None,
    log_file: IO[bytes],
    prefix: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    child_env = dict(os.environ)
    child_env["GITMEM_HOME"] = str(home)
    child_env.setdefault("GITMEM_LOG_LEVEL", "WARNING")
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), child_env.get("PYTHONPATH")]))
    child_env.update(env or {})
    cmd = [
        *prefix,
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=child_env, stdout=log_file, stderr=subprocess.STDOUT)


def wait_healthy(
    proc: subprocess.Popen[bytes], base_url: str, timeout: float = 120.0, log: Callable[[], str] = str
) -> None:
    """Wait until the server ``proc`` answers ``/healthz`` with 200; fail with ``log()`` if it exits or
    does not answer in ``timeout`` seconds (generous: a loaded shared machine starts Python slowly)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerFailed(f"the server exited with {proc.returncode}:\n{log()}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise ServerFailed(f"the server did not answer /healthz within {timeout}s:\n{log()}")


def start_gitmem_serve(port: int, env: Mapping[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``gitmem serve --port PORT ARGS`` in a subprocess, its output (the access log too) in ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "gitmem.cli", "serve", "--port", str(port), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait_healthy(proc: subprocess.Popen[bytes], base_url: str, timeout: float, log_file: IO[bytes]) -> None:
    wait_healthy(proc, base_url, timeout, lambda: _tail(log_file))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _tail(log_file: IO[bytes], limit: int = 4000) -> str:
    log_file.seek(0)
    return log_file.read().decode("utf-8", "replace")[-limit:]
