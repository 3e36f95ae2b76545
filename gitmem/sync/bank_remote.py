"""A profile's memory bank as a mount :class:`~gitmem.sync.mount.Remote`, over the bank REST API (the profile-bank API).

``BankRemote(base_url, token, profile_id)`` speaks ``/v1/profiles/{id}/memories`` with the user's token;
``Mount(BankRemote(...), workspace / ".memory", clean=True)`` is the session's ``.memory/`` directory.

The bank API names entries by path, so ``memory_id`` is the store-form path (``/projects/acme.md``) and a
rename is a ``PUT`` of the new path (``If-None-Match: *``) followed by a ``DELETE`` of the old one
(``If-Match`` its hash): two versions, and the entry is new at its new path. Preconditions travel as
``If-Match: "<content_hash>"``.

It also holds the agent-runtime session hooks (``hooks/agent/session-start`` and ``session-end`` run
``python -m gitmem.sync.bank_remote session-start|session-end``):

- **session-start** mounts ``$GITMEM_PROFILE``'s bank at ``$WORKSPACE/.memory/`` in a background process
  (a clean start: files that are not entries are removed), waits until every entry is on disk, and
  prints the ``## Profile Memory Bank`` section on standard output (a coding agent's SessionStart hook
  adds that to the model's context). Without ``GITMEM_PROFILE`` it prints nothing: only sessions started
  from a profile see the bank.
- **session-end** stops that process, which pushes every pending change before it exits (SIGTERM), and
  removes its pid file. If the process is gone, a one-shot mount pushes what is in ``.memory/``.

Both read ``GITMEM_URL`` and ``GITMEM_TOKEN`` (the user's token); the workspace is ``$WORKSPACE``, else
the ``cwd`` of the JSON a hook runner passes on standard input, else the current directory.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from gitmem.errors import GitmemError
from gitmem.rules.paths import validate_bank_path
from gitmem.settings import SettingsError, load_settings
from gitmem.sync.mount import Mount
from gitmem.sync.remote import (
    RemoteEntry,
    RemoteError,
    RemoteNotFound,
    RemotePathConflict,
    RemotePreconditionFailed,
    RemoteRefused,
    RemoteUnavailable,
)

log = logging.getLogger("gitmem.sync.bank_remote")

MEMORY_DIR = ".memory"
READY_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 120.0


def _bank(path: str) -> str:
    """Store form ``/a/b.md`` -> the bank's ``a/b.md``."""
    return path[1:] if path.startswith("/") else path


def _store(path: str) -> str:
    return path if path.startswith("/") else "/" + path


class BankRemote:
    """The mount's Remote protocol over ``/v1/profiles/{profile_id}/memories``."""

    def __init__(
        self, base_url: str, token: str, profile_id: str, *, timeout: float = 30.0, client: httpx.Client | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.profile_id = profile_id
        self._root = f"/v1/profiles/{quote(profile_id, safe='')}"
        self._client = client or httpx.Client(
            base_url=self.base_url, timeout=timeout, headers={"Authorization": f"Bearer {token}"}
        )

    def close(self) -> None:
        self._client.close()

    # -- HTTP ---------------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        suffix: str,
        *,
        path: str | None = None,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        params = {"path": _bank(path)} if path is not None else None
        try:
            response = self._client.request(method, self._root + suffix, params=params, json=json_body, headers=headers)
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(f"cannot reach {self.base_url}: {exc}") from exc
        if response.status_code < 400:
            return response
        try:
            error = response.json().get("error", {})
        except ValueError:
            error = {}
        error = error if isinstance(error, dict) else {}
        message = str(error.get("message") or f"HTTP {response.status_code}")
        kind = error.get("type")
        if kind == "memory_precondition_failed_error":
            raise RemotePreconditionFailed(message)
        if kind == "memory_path_conflict_error":
            other = error.get("conflicting_path")
            raise RemotePathConflict(message, conflicting_path=_store(other) if isinstance(other, str) else None)
        if response.status_code == 404:
            raise RemoteNotFound(message)
        if response.status_code in (408, 409, 429) or response.status_code >= 500:
            raise RemoteUnavailable(message)
        raise RemoteRefused(message)

    @staticmethod
    def _entry(data: dict[str, Any], content: str | None = None) -> RemoteEntry:
        path = _store(data["path"])
        text = data.get("content", content)
        return RemoteEntry(path, path, data["content_hash"], data["content_hash"], text)

    # -- the protocol -------------------------------------------------------------------------------

    def validate_path(self, path: str) -> None:
        if not path.startswith("/"):
            raise ValueError(f"invalid path {path!r}: the mount's paths start with '/'")
        try:
            validate_bank_path(path[1:])
        except GitmemError as exc:
            raise ValueError(exc.message) from None

    def list_all(self, *, with_content: bool = False) -> dict[str, RemoteEntry]:
        # The bank lists metadata only (the profile-bank API); the mount reads each body it needs.
        data = self._call("GET", "/memories").json()
        return {(e := self._entry(m)).path: e for m in data["memories"]}

    def read(self, memory_id: str) -> RemoteEntry:
        return self._entry(self._call("GET", "/memories/content", path=memory_id).json())

    def _put(self, path: str, content: str, headers: dict[str, str]) -> RemoteEntry:
        response = self._call("PUT", "/memories/content", path=path, json_body={"content": content}, headers=headers)
        return self._entry(response.json(), content)

    def create(self, path: str, content: str) -> RemoteEntry:
        try:
            return self._put(path, content, {"If-None-Match": "*"})
        except RemotePreconditionFailed as exc:
            raise RemotePathConflict(
                f"an entry exists at {_bank(path)}: {exc.message}", conflicting_path=path
            ) from None

    def update(
        self, memory_id: str, *, content: str | None = None, path: str | None = None, expected_sha256: str | None = None
    ) -> RemoteEntry:
        headers = {"If-Match": f'"{expected_sha256}"'} if expected_sha256 else {}
        if path is None or path == memory_id:
            if content is None:
                current = self.read(memory_id)
                if expected_sha256 and current.sha256 != expected_sha256:
                    raise RemotePreconditionFailed(f"{_bank(memory_id)} changed")
                return current
            try:
                return self._put(memory_id, content, headers)
            except RemotePreconditionFailed:
                self.read(memory_id)  # RemoteNotFound when it is gone, as the protocol asks
                raise
        # A rename: the new path, then the old one removed (only if it is still what was read).
        current = self.read(memory_id)
        if expected_sha256 and current.sha256 != expected_sha256:
            raise RemotePreconditionFailed(f"{_bank(memory_id)} changed")
        text = content if content is not None else (current.content or "")
        moved = self.create(path, text)
        try:
            self.delete(memory_id, expected_sha256=current.sha256)
        except RemoteNotFound:
            pass
        except RemotePreconditionFailed:
            log.warning("%s changed while it was renamed to %s; both are kept", _bank(memory_id), _bank(path))
        return moved

    def delete(self, memory_id: str, *, expected_sha256: str | None = None) -> None:
        headers = {"If-Match": f'"{expected_sha256}"'} if expected_sha256 else {}
        self._call("DELETE", "/memories/content", path=memory_id, headers=headers)

    def prompt(self) -> str:
        """The system-prompt section for this bank, as the server renders it."""
        return self._call("GET", "/prompt").text


# -- a bank mounted until a signal ---------------------------------------------------------------------


def bank_mount(
    url: str, token: str, profile_id: str, folder: Path, *, debounce: float = 0.3, poll_interval: float = 1.0
) -> Mount:
    """A started mount of the bank at ``folder`` (clean start: files that are not entries are removed)."""
    remote = BankRemote(url, token, profile_id)
    mount = Mount(remote, folder, debounce=debounce, poll_interval=poll_interval, clean=True, name=profile_id)
    mount.start()
    return mount


def run_until_signal(mount: Mount, *, pid_file: Path | None = None) -> int:
    """Keep ``mount`` running until SIGTERM/SIGINT, then stop it (pushing what is pending)."""
    done = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: done.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if pid_file is not None:
            _write_atomic(pid_file, f"{os.getpid()}\n")  # written once every entry is on disk: "ready"
        last = ""
        while not done.wait(1.0):
            line = mount.status.line()
            if line != last:
                log.info("bank %s: %s", mount.name, line)
                last = line
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            mount.stop()
        finally:
            if pid_file is not None:
                with contextlib.suppress(FileNotFoundError):
                    pid_file.unlink()
    log.info("bank %s unmounted: %s", mount.name, mount.status.line())
    return 1 if mount.status.errors else 0


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


# -- the session hooks -----------------------------------------------------------------------------------


def state_dir(workspace: Path) -> Path:
    """Where a workspace's mount keeps its pid file and log (outside ``.memory/``, which is the bank's)."""
    root = load_settings().STATE_DIR or os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
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


def _settings(args: argparse.Namespace) -> tuple[str, str, str | None]:
    settings = load_settings()
    url = args.url or settings.URL or ""
    token = settings.TOKEN.get_secret_value() if settings.TOKEN is not None else ""
    profile = args.profile or settings.PROFILE
    if profile and (not url or not token):
        raise RemoteRefused("GITMEM_URL and GITMEM_TOKEN (the user's token) must be set to mount a profile's bank")
    return url, token, profile


def session_start(args: argparse.Namespace) -> int:
    hook = _hook_input()
    url, token, profile = _settings(args)
    if not profile:
        return 0  # not a profile session: no bank, no section
    workspace = _workspace(args.workspace, hook)
    folder = workspace / MEMORY_DIR
    state = state_dir(workspace)
    pid_file, log_file = state / "mount.pid", state / "mount.log"
    if _pid(pid_file) is not None:
        _stop(pid_file)  # a mount left from an earlier session: flush it before starting clean
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    cmd = [
        sys.executable,
        "-m",
        "gitmem.sync.bank_remote",
        "mount",
        "--url",
        url,
        "--profile",
        profile,
        "--pid-file",
        str(pid_file),
        "--debounce",
        str(args.debounce),
        "--poll-interval",
        str(args.poll_interval),
        str(folder),
    ]
    with open(log_file, "ab") as log_out:
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_out,
            stderr=log_out,
            start_new_session=True,
            cwd=str(workspace),
        )
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while not pid_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            if proc.poll() is None:
                proc.terminate()
            sys.stderr.write(f"gitmem: the memory bank could not be mounted at {folder}\n{tail}\n")
            return 1
        time.sleep(0.05)
    remote = BankRemote(url, token, profile)
    try:
        section = remote.prompt()
    finally:
        remote.close()
    sys.stdout.write(section if section.endswith("\n") else section + "\n")
    return 0


def session_end(args: argparse.Namespace) -> int:
    hook = _hook_input()
    url, token, profile = _settings(args)
    workspace = _workspace(args.workspace, hook)
    pid_file = state_dir(workspace) / "mount.pid"
    if _stop(pid_file):
        sys.stderr.write(f"gitmem: memory bank flushed and unmounted from {workspace / MEMORY_DIR}\n")
        return 0
    folder = workspace / MEMORY_DIR
    if not profile or not folder.is_dir():
        return 0
    # The mount is gone (crashed or never started): push what is in .memory/ once. Without the mount's
    # memory of what was synced, a file that differs from its entry is merged (or kept beside it).
    mount = Mount(BankRemote(url, token, profile), folder, clean=False, name=profile)
    mount.start()
    mount.stop()
    sys.stderr.write(f"gitmem: memory bank synced from {folder}: {mount.status.line()}\n")
    return 1 if mount.status.errors else 0


def _mount_main(args: argparse.Namespace) -> int:
    url, token, profile = _settings(args)
    if not profile:
        raise RemoteRefused("--profile (or $GITMEM_PROFILE) is required")
    mount = bank_mount(url, token, profile, Path(args.folder), debounce=args.debounce, poll_interval=args.poll_interval)
    return run_until_signal(mount, pid_file=Path(args.pid_file) if args.pid_file else None)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gitmem.sync.bank_remote")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("session-start", "session-end", "mount"):
        p = sub.add_parser(name)
        p.add_argument("--url", default=None, help="default: $GITMEM_URL")
        p.add_argument("--profile", default=None, help="default: $GITMEM_PROFILE")
        p.add_argument("--debounce", type=float, default=0.3)
        p.add_argument("--poll-interval", type=float, default=1.0)
        if name == "mount":
            p.add_argument("--pid-file", default=None)
            p.add_argument("folder")
        else:
            p.add_argument("--workspace", default=None, help="default: $WORKSPACE, the hook's cwd, or .")
    return parser


@contextlib.contextmanager
def _logging(default_level: str) -> Iterator[None]:
    logging.basicConfig(
        level=load_settings().LOG_LEVEL or default_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    yield


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The hooks' standard error reaches the agent runner; the mount's goes to its log file.
    with _logging("INFO" if args.command == "mount" else "WARNING"):
        try:
            if args.command == "session-start":
                return session_start(args)
            if args.command == "session-end":
                return session_end(args)
            return _mount_main(args)
        except SettingsError as exc:
            sys.stderr.write(f"gitmem: {exc.message}\n")
            return 2
        except GitmemError as exc:
            sys.stderr.write(f"gitmem: {exc.message}\n")
            return 1


if __name__ == "__main__":
    sys.exit(main())
