"""Running ``git http-backend`` for one smart-HTTP request, and the :class:`GitResponse` it answers with.

The request body is piped into the backend chunk by chunk and its answer read out in chunks, so neither
a pack nor a repository is held in memory; closing the response kills the backend and what it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)


CHUNK = 64 * 1024
MAX_CGI_HEADER_BYTES = 64 * 1024
TERMINATE_GRACE_SECONDS = 2.0


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover  (makes this an async generator)


async def once(data: bytes) -> AsyncIterator[bytes]:
    yield data


@dataclass
class GitResponse:
    """What to send back: status, headers, and a body to stream in order."""

    status: int
    headers: list[tuple[str, str]]
    body: AsyncIterator[bytes] = field(default_factory=_empty)

    async def aclose(self) -> None:
        """Stop the response early (client gone): kills the git processes behind a streamed body."""
        close = getattr(self.body, "aclose", None)
        if close is not None:
            await close()


def text_response(status: int, message: str, headers: Iterable[tuple[str, str]] = ()) -> GitResponse:
    """A plain-text answer; Git prints a text/plain error body to the user as ``remote: <line>``."""
    body = (message.rstrip("\n") + "\n").encode()
    return GitResponse(
        status,
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-cache, max-age=0, must-revalidate"),
            *headers,
        ],
        once(body),
    )


def _kill_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    # The backend runs in its own process group with upload-pack/pack-objects/receive-pack/hooks.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _terminate(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM first (git removes its lock files on it), SIGKILL if anything lingers."""
    _kill_group(proc, signal.SIGTERM)
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _kill_group(proc, signal.SIGKILL)
        return
    loop.call_later(TERMINATE_GRACE_SECONDS, _kill_group, proc, signal.SIGKILL)


async def _feed(proc: asyncio.subprocess.Process, source: AsyncIterator[bytes]) -> None:
    """Pipe the request body into the backend, chunk by chunk, with backpressure."""
    assert proc.stdin is not None  # noqa: S101  narrows the type for mypy; never a check of input
    try:
        async for chunk in source:
            if chunk:
                proc.stdin.write(chunk)
                await proc.stdin.drain()
        proc.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # git stopped reading; its output says why
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the client went away mid-upload, or sent a broken body
        log.info("request body failed (%s); stopping git", type(exc).__name__)
        _terminate(proc)


async def _drain_stderr(proc: asyncio.subprocess.Process, repo_name: str) -> None:
    assert proc.stderr is not None  # noqa: S101  narrows the type for mypy; never a check of input
    kept = bytearray()
    while chunk := await proc.stderr.read(CHUNK):
        if len(kept) < 8192:
            kept += chunk[: 8192 - len(kept)]
    if kept:
        log.info("git http-backend (%s): %s", repo_name, kept.decode(errors="replace").strip())


class _BackendBody:
    """The backend's stdout after the CGI headers; closing it early kills the process group."""

    def __init__(
        self, proc: asyncio.subprocess.Process, first: bytes, tasks: list[asyncio.Task[None]], name: str
    ) -> None:
        self._proc = proc
        self._first = first
        self._tasks = tasks
        self._name = name
        self._done = False

    def __aiter__(self) -> _BackendBody:
        return self

    async def __anext__(self) -> bytes:
        if self._done:
            raise StopAsyncIteration
        if self._first:
            chunk, self._first = self._first, b""
            return chunk
        assert self._proc.stdout is not None  # noqa: S101  narrows the type for mypy; never a check of input
        try:
            chunk = await self._proc.stdout.read(CHUNK)
        except BaseException:
            self.close()
            raise
        if chunk:
            return chunk
        self._done = True
        returncode = await self._proc.wait()
        # Everything git had to say is out; a client still sending (or stalled) is no reason to wait.
        for task in self._tasks[1:]:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if returncode:
            log.warning("git http-backend exited with %s for %s", returncode, self._name)
        raise StopAsyncIteration

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        if self._proc.returncode is None:
            log.info("client gone; stopping git for %s", self._name)
            _terminate(self._proc)
        for task in self._tasks:
            task.cancel()

    async def aclose(self) -> None:
        self.close()

    def __del__(self) -> None:
        # Last resort if the caller neither finished nor closed the body.
        if not self._done and self._proc.returncode is None:
            _kill_group(self._proc, signal.SIGKILL)


def _parse_cgi_headers(raw: bytes) -> tuple[int, list[tuple[str, str]]]:
    status = 200
    headers: list[tuple[str, str]] = []
    for line in raw.decode("latin-1").splitlines():
        name, sep, value = line.partition(":")
        if not sep:
            continue
        name, value = name.strip(), value.strip()
        if name.lower() == "status":
            status = int(value.split(" ", 1)[0])
        else:
            headers.append((name, value))
    return status, headers


async def run_backend(repo_path: Path, env: dict[str, str], stdin: AsyncIterator[bytes] | None) -> GitResponse:
    proc = await asyncio.create_subprocess_exec(
        "git",
        "http-backend",
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    tasks = [asyncio.create_task(_drain_stderr(proc, repo_path.name))]  # stderr first: see _BackendBody
    if stdin is not None:
        tasks.append(asyncio.create_task(_feed(proc, stdin)))
    assert proc.stdout is not None  # noqa: S101  narrows the type for mypy; never a check of input
    head = bytearray()
    try:
        while not (match := re.search(rb"\r?\n\r?\n", head)):
            chunk = await proc.stdout.read(CHUNK) if len(head) <= MAX_CGI_HEADER_BYTES else b""
            if not chunk:
                log.error("git http-backend gave no CGI headers for %s", repo_path.name)
                _BackendBody(proc, b"", tasks, repo_path.name).close()
                return text_response(502, "gitmem: git backend failed")
            head += chunk
    except BaseException:
        _BackendBody(proc, b"", tasks, repo_path.name).close()
        raise
    status, headers = _parse_cgi_headers(bytes(head[: match.start()]))
    body = _BackendBody(proc, bytes(head[match.end() :]), tasks, repo_path.name)
    if status >= 400:
        # http-backend's own error bodies can name server paths; say only what went wrong.
        body.close()
        log.info("git http-backend answered %s for %s", status, repo_path.name)
        return text_response(status, f"gitmem: Git request refused ({status})")
    return GitResponse(status, headers, body)
