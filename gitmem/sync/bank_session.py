"""The agent-runtime session hooks of a profile's memory bank (``hooks/agent/session-start`` and
``session-end`` run ``gitmem hook session-start|session-end``):

- **session-start** mounts ``$GITMEM_PROFILE``'s bank at ``$WORKSPACE/.memory/`` in a background process
  (``gitmem bank-mount``; a clean start: files that are not entries are removed), waits until every
  entry is on disk, and prints the ``## Profile Memory Bank`` section on standard output (a coding
  agent's SessionStart hook adds that to the model's context). Without ``GITMEM_PROFILE`` it prints
  nothing: only sessions started from a profile see the bank.
- **session-end** stops that process, which pushes every pending change before it exits (SIGTERM), and
  removes its pid file. If the process is gone, a one-shot mount pushes what is in ``.memory/``.

Both read ``GITMEM_URL`` and ``GITMEM_TOKEN`` (the user's token); the workspace is ``$WORKSPACE``, else
the ``cwd`` of the JSON a hook runner passes on standard input, else the current directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitmem.sync.bank_remote import BankRemote
from gitmem.sync.mount import Mount
from gitmem.sync.remote import RemoteError, RemoteRefused

MEMORY_DIR = ".memory"
READY_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class BankSession:
    """What a session hook is given, from its options and settings (``GITMEM_URL``, ``GITMEM_TOKEN``,
    ``GITMEM_PROFILE``, ``GITMEM_STATE_DIR``), read where the hook starts."""

    url: str = ""
    token: str = field(default="", repr=False)
    profile: str | None = None
    state_root: Path | None = None

    def checked(self) -> BankSession:
        if self.profile and (not self.url or not self.token):
            raise RemoteRefused("GITMEM_URL and GITMEM_TOKEN (the user's token) must be set to mount a profile's bank")
        return self


def state_dir(workspace: Path, state_root: Path | None = None) -> Path:
    """Where a workspace's mount keeps its pid file and log (outside ``.memory/``, which is the bank's)."""
    root = state_root or os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    digest = hashlib.sha256(str(workspace.resolve()).encode()).hexdigest()[:16]
    path = Path(root) / f"gitmem-bank-{os.getuid()}-{digest}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _hook_input() -> dict[str, Any]:
    """The JSON a hook runner (e.g. a coding agent's SessionStart hook) writes on standard input, if any."""
    if sys.stdin is None or sys.stdin.isatty():
        return {}
    with contextlib.suppress(OSError, ValueError):
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if ready:
            data = json.loads(sys.stdin.read() or "{}")
            return data if isinstance(data, dict) else {}
    return {}


def _workspace(explicit: str | None, hook: dict[str, Any]) -> Path:
    chosen = explicit or os.environ.get("WORKSPACE") or hook.get("cwd") or os.getcwd()
    return Path(chosen).absolute()


def _pid(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child (else it lingers as a zombie)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _stop(pid_file: Path, timeout: float = STOP_TIMEOUT_SECONDS) -> bool:
    """SIGTERM the mount named in ``pid_file`` and wait for it to flush and exit."""
    pid = _pid(pid_file)
    if pid is None:
        with contextlib.suppress(FileNotFoundError):
            pid_file.unlink()
        return False
    os.kill(pid, signal.SIGTERM)
    if not _wait_gone(pid, timeout):
        raise RemoteError(f"the bank mount (pid {pid}) did not stop within {timeout:.0f} s; it is left running")
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()
    return True


def _spawn_mount(
    session: BankSession,
    profile: str,
    folder: Path,
    workspace_dir: Path,
    pid_file: Path,
    log_file: Path,
    debounce: float,
    poll_interval: float,
) -> subprocess.Popen[bytes]:
    """``gitmem bank-mount`` started in a session of its own, outliving the hook, logging to ``log_file``."""
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        "GITMEM_TOKEN": session.token,
    }
    cmd = [
        sys.executable,
        "-P",  # nothing imported from the workspace the mount runs in
        "-m",
        "gitmem",
        "--verbose",
        "bank-mount",
        "--url",
        session.url,
        "--profile",
        profile,
        "--pid-file",
        str(pid_file),
        "--debounce",
        str(debounce),
        "--poll-interval",
        str(poll_interval),
        str(folder),
    ]
    with open(log_file, "ab") as log_out:
        return subprocess.Popen(  # noqa: S603  an argument list (no shell) of our own
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_out,
            stderr=log_out,
            start_new_session=True,
            cwd=str(workspace_dir),
        )


def _mount_ready(proc: subprocess.Popen[bytes], pid_file: Path) -> bool:
    """Wait until the mount writes its pid file (every entry is on disk); False if it exits first or is
    not ready in :data:`READY_TIMEOUT_SECONDS`."""
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while not pid_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _print_prompt(remote: BankRemote) -> None:
    """The bank's ``## Profile Memory Bank`` section, for the agent's system prompt."""
    try:
        section = remote.prompt()
    finally:
        remote.close()
    sys.stdout.write(section if section.endswith("\n") else section + "\n")


def session_start(session: BankSession, *, workspace: str | None, debounce: float, poll_interval: float) -> int:
    """The SessionStart hook: mount the bank in the background, print the prompt section; the exit status."""
    hook = _hook_input()
    url, token, profile = session.checked().url, session.token, session.profile
    if not profile:
        return 0  # not a profile session: no bank, no section
    workspace_dir = _workspace(workspace, hook)
    folder = workspace_dir / MEMORY_DIR
    state = state_dir(workspace_dir, session.state_root)
    pid_file, log_file = state / "mount.pid", state / "mount.log"
    if _pid(pid_file) is not None:
        _stop(pid_file)  # a mount left from an earlier session: flush it before starting clean
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()
    proc = _spawn_mount(session, profile, folder, workspace_dir, pid_file, log_file, debounce, poll_interval)
    if not _mount_ready(proc, pid_file):
        tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
        if proc.poll() is None:
            proc.terminate()
        sys.stderr.write(f"gitmem: the memory bank could not be mounted at {folder}\n{tail}\n")
        return 1
    _print_prompt(BankRemote(url, token, profile))
    return 0


def session_end(session: BankSession, *, workspace: str | None) -> int:
    """The SessionEnd hook: stop the background mount (it pushes what is pending); the exit status."""
    hook = _hook_input()
    url, token, profile = session.checked().url, session.token, session.profile
    workspace_dir = _workspace(workspace, hook)
    pid_file = state_dir(workspace_dir, session.state_root) / "mount.pid"
    if _stop(pid_file):
        sys.stderr.write(f"gitmem: memory bank flushed and unmounted from {workspace_dir / MEMORY_DIR}\n")
        return 0
    folder = workspace_dir / MEMORY_DIR
    if not profile or not folder.is_dir():
        return 0
    # The mount is gone (crashed or never started): push what is in .memory/ once. Without the mount's
    # memory of what was synced, a file that differs from its entry is merged (or kept beside it).
    with BankRemote(url, token, profile) as remote:
        mount = Mount(remote, folder, clean=False, name=profile)
        mount.start()
        mount.stop()
    sys.stderr.write(f"gitmem: memory bank synced from {folder}: {mount.status.line()}\n")
    return 1 if mount.status.errors else 0
