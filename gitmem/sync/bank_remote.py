"""A profile's memory bank as a mount :class:`~gitmem.sync.mount.Remote`, over the bank REST API (the profile-bank API).

``BankRemote(base_url, token, profile_id)`` speaks ``/v1/profiles/{id}/memories`` with the user's token;
``Mount(BankRemote(...), workspace / ".memory", clean=True)`` is the session's ``.memory/`` directory.

The bank API names entries by path, so ``memory_id`` is the store-form path (``/projects/acme.md``) and a
rename is a ``PUT`` of the new path (``If-None-Match: *``) followed by a ``DELETE`` of the old one
(``If-Match`` its hash): two versions, and the entry is new at its new path. Preconditions travel as
``If-Match: "<content_hash>"``.

:func:`bank_mount` and :func:`run_until_signal` keep a bank mounted until a signal (``gitmem
bank-mount``); the agent-runtime session hooks that start and stop that process are in
:mod:`gitmem.sync.bank_session`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from gitmem.errors import GitmemError
from gitmem.rules.paths import validate_bank_path
from gitmem.sync.mount import Mount
from gitmem.sync.remote import (
    RemoteEntry,
    RemoteNotFound,
    RemotePathConflict,
    RemotePreconditionFailed,
    RemoteRefused,
    RemoteUnavailable,
)

log = logging.getLogger("gitmem.sync.bank_remote")


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

    def __enter__(self) -> BankRemote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def list_all(self, *, with_content: bool = False) -> dict[str, RemoteEntry]:  # noqa: ARG002  the Remote protocol's signature
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


@contextlib.contextmanager
def bank_mount(
    url: str, token: str, profile_id: str, folder: Path, *, debounce: float = 0.3, poll_interval: float = 1.0
) -> Iterator[Mount]:
    """A started mount of the bank at ``folder`` (clean start: files that are not entries are removed),
    stopped at the end of the block; then its remote's HTTP client is closed (this owns it, not the mount)."""
    with BankRemote(url, token, profile_id) as remote:
        mount = Mount(remote, folder, debounce=debounce, poll_interval=poll_interval, clean=True, name=profile_id)
        mount.start()
        try:
            yield mount
        finally:
            mount.stop()


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
