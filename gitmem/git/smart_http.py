"""Git's smart HTTP protocol for one bare repository, streamed through ``git http-backend``.

The HTTP layer (``api/``) authenticates the caller, maps ``/v1/memory_stores/{id}.git/<rest>`` to a
repository and a permission, and hands ``<rest>`` to :func:`serve_git`. The answer is a
:class:`GitResponse` whose body is read out of the backend in chunks, while the request body is
piped into it chunk by chunk: neither a pack nor a repository is ever held in memory. A caller that
sees its client go away must call :meth:`GitResponse.aclose` (or cancel the task iterating the
body): that kills the backend and the ``upload-pack``/``pack-objects`` it started.

Only the smart protocol is served: ``GET info/refs?service=git-upload-pack|git-receive-pack`` and
``POST git-upload-pack|git-receive-pack``. Dumb HTTP (``/HEAD``, ``/objects/...``, plain
``info/refs``) is 404: it would hand out any object file, reachable or not.

Unreachable objects (what git 2.39 really does, read in upload-pack.c and serve.c of v2.39.5 and
checked against the installed ``git upload-pack --stateless-rpc``):

* protocol v2 ``fetch`` (``parse_want``) only checks that a wanted object *exists*; the
  ``uploadpack.allow*SHA1InWant`` settings are never consulted in v2. A dropped blob or commit that
  is still on disk is served to anyone who names its id.
* protocol v0/v1 over HTTP is stateless, so ``check_non_tip`` runs ``git rev-list --stdin`` on the
  non-tip wants with the refs negated. Without ``--objects`` rev-list ignores trees and blobs, so an
  unreachable *commit* is refused ("not our ref") but an unreachable *blob or tree* is served.
* protocol v2 ``object-info`` (advertised unconditionally in 2.39) tells the size of any object.

So the configuration alone cannot keep unreachable objects in: gitmem sets all three
``uploadpack.allow*SHA1InWant=false`` (so v0 keeps refusing what it can) and, in front of
upload-pack, reads every request's wants itself. A want is served only if it is the tip of a ref
(HEAD included) or a commit reachable from one (``git rev-list <wants> --not --all`` prints nothing);
anything else gets Git's own answer, ``ERR upload-pack: not our ref <id>``, and upload-pack is not
started. ``object-info`` and unknown v2 commands are refused the same way. ``uploadpack.allowFilter``
is off because a partial clone later fetches single blobs by id, which this rule refuses; better a
full clone than a clone that breaks on first checkout. Left open: a ``have`` line is still ACKed for
any object on disk (an existence oracle, never content); section 7's physical deletion closes it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import os
import re
import signal
import zlib
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

__all__ = [
    "PUSH_REFUSED_MESSAGE",
    "GitResponse",
    "REALM",
    "basic_auth_secret",
    "forbidden_response",
    "serve_git",
    "text_response",
    "unauthorized_response",
]

log = logging.getLogger(__name__)

REALM = "gitmem"
UPLOAD_PACK = "git-upload-pack"
RECEIVE_PACK = "git-receive-pack"
CHUNK = 64 * 1024
# http-backend buffers an upload-pack request itself and refuses one past http.maxRequestBuffer
# (10 MiB by default), so reading the negotiation here to check its wants costs no more than that.
MAX_NEGOTIATION_BYTES = 10 * 1024 * 1024
MAX_CGI_HEADER_BYTES = 64 * 1024
TERMINATE_GRACE_SECONDS = 2.0
# Environment a git subprocess may inherit; everything else (GIT_DIR, GIT_CONFIG_*, ...) is dropped.
_INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

PUSH_REFUSED_MESSAGE = "gitmem: push refused: this credential may read this memory store but not write to it"


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover  (makes this an async generator)


async def _once(data: bytes) -> AsyncIterator[bytes]:
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
        _once(body),
    )


def unauthorized_response(message: str = "gitmem: authentication required") -> GitResponse:
    """401 with a Basic challenge, so Git asks its credential helper (or the user) and retries."""
    return text_response(401, message, [("WWW-Authenticate", f'Basic realm="{REALM}"')])


def forbidden_response(message: str = PUSH_REFUSED_MESSAGE) -> GitResponse:
    return text_response(403, message)


def basic_auth_secret(headers: Mapping[str, str]) -> str | None:
    """The API key a Git client (or any HTTP client) presented, or None.

    Git sends it as the Basic-auth password with any username; a token given as the username with an
    empty password is accepted too. ``Authorization: Bearer KEY`` and ``x-api-key: KEY`` also work.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    authorization = lowered.get("authorization", "").strip()
    scheme, _, credentials = authorization.partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "basic" and credentials:
        try:
            decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        username, _, password = decoded.partition(":")
        return password or username or None
    if scheme.lower() == "bearer" and credentials:
        return credentials
    api_key = lowered.get("x-api-key", "").strip()
    return api_key or None


class _Refused(Exception):
    """A request upload-pack must not see; the message goes to the client as an ERR packet."""


class _BadRequest(Exception):
    """A malformed request body."""


async def serve_git(
    repo_path: Path,
    *,
    method: str,
    path_info: str,
    query_string: str,
    headers: Mapping[str, str],
    body: AsyncIterator[bytes],
    remote_user: str,
    allow_push: bool,
    extra_env: Mapping[str, str] = {},  # noqa: B006 - read only
    hooks_path: Path | None = None,
) -> GitResponse:
    """Serve one smart-HTTP request for the bare repository at ``repo_path``.

    ``path_info`` is what follows the repository in the URL (``/info/refs``, ``/git-upload-pack``,
    ``/git-receive-pack``). The caller has already authenticated ``remote_user`` (passed to Git as
    REMOTE_USER, so hooks and reflogs see it) and decided ``allow_push``. ``extra_env`` is added to
    the environment of the git processes (e.g. for hooks); it cannot override the CGI variables or
    the safety settings. ``hooks_path`` forces ``core.hooksPath`` for a push, so a repository's own
    config cannot turn the rules off.
    """
    repo_path = Path(repo_path)
    hdrs = {k.lower(): v for k, v in headers.items()}
    service = _route(method, path_info, query_string)
    if isinstance(service, GitResponse):
        return service
    if service == RECEIVE_PACK and not allow_push:
        log.info("push refused for %s on %s (read-only credential)", remote_user, repo_path.name)
        return forbidden_response()
    if not repo_path.is_dir():
        return text_response(404, "gitmem: no such memory store")

    version = _protocol_version(hdrs.get("git-protocol", ""))
    env = _cgi_env(repo_path, method, path_info, service, hdrs, remote_user, allow_push, version, extra_env, hooks_path)
    encoding = hdrs.get("content-encoding", "").strip().lower()
    stdin: AsyncIterator[bytes] | None = None

    if method == "POST" and service == UPLOAD_PACK:
        if encoding in ("gzip", "x-gzip"):
            body = _gunzip(body)  # decoded here, so the wants can be read; http-backend gets plain bytes
        elif encoding not in ("", "identity"):
            return text_response(415, f"gitmem: unsupported Content-Encoding {encoding!r}")
        try:
            stdin = await _checked_upload_request(repo_path, body, version == 2, env)
        except _Refused as refused:
            log.warning("upload-pack request refused on %s: %s", repo_path.name, refused)
            return _err_packet_response(str(refused))
        except _BadRequest as bad:
            return text_response(400, f"gitmem: bad upload-pack request: {bad}")
    elif method == "POST":
        if encoding in ("gzip", "x-gzip"):
            env["HTTP_CONTENT_ENCODING"] = "gzip"  # http-backend inflates it (run_service)
        elif encoding not in ("", "identity"):
            return text_response(415, f"gitmem: unsupported Content-Encoding {encoding!r}")
        stdin = body

    log.debug("git %s %s%s for %s", method, repo_path.name, path_info, remote_user)
    return await _run_backend(repo_path, env, stdin)


def _route(method: str, path_info: str, query_string: str) -> str | GitResponse:
    """The service a request is for, or the refusal to send."""
    endpoints = {"/info/refs": "GET", f"/{UPLOAD_PACK}": "POST", f"/{RECEIVE_PACK}": "POST"}
    allowed = endpoints.get(path_info)
    if allowed is None:
        return text_response(404, "gitmem: not found (only Git's smart HTTP protocol is served)")
    if method != allowed:
        return text_response(405, f"gitmem: use {allowed}", [("Allow", allowed)])
    if path_info != "/info/refs":
        return path_info[1:]
    services = parse_qs(query_string).get("service", [])
    if len(services) != 1 or services[0] not in (UPLOAD_PACK, RECEIVE_PACK):
        # A plain info/refs is dumb HTTP.
        return text_response(404, "gitmem: not found (only Git's smart HTTP protocol is served)")
    return services[0]


def _protocol_version(header: str) -> int:
    """The version upload-pack will speak: the highest ``version=N`` offered (as git's own parser)."""
    version = 0
    for item in header.split(":"):
        key, _, value = item.strip().partition("=")
        if key == "version" and value in ("1", "2"):
            version = max(version, int(value))
    return version


def _base_env(extra_env: Mapping[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
    env.update(extra_env)
    return env


def _safety_config(allow_push: bool, hooks_path: Path | None = None) -> dict[str, str]:
    config = {
        "http.getanyfile": "false",
        "http.uploadpack": "true",
        "http.receivepack": "true" if allow_push else "false",
        "uploadpack.allowAnySHA1InWant": "false",
        "uploadpack.allowReachableSHA1InWant": "false",
        "uploadpack.allowTipSHA1InWant": "false",
        "uploadpack.allowFilter": "false",
        "uploadpack.allowRefInWant": "false",
        "uploadpack.hideRefs": "refs/gitmem",
        # Section 3's per-store settings, repeated here so a store's own config can't loosen them.
        "receive.denyNonFastForwards": "true",
        "receive.denyDeletes": "true",
        "receive.fsckObjects": "true",  # first defence against malformed trees (duplicate entries)
    }
    if allow_push and hooks_path is not None:
        config["core.hooksPath"] = str(hooks_path)
    return config


def _with_config(env: dict[str, str], config: Mapping[str, str]) -> dict[str, str]:
    # GIT_CONFIG_COUNT is command-line scope: it wins over the repository's own config.
    env = {k: v for k, v in env.items() if not k.startswith("GIT_CONFIG_")}
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for i, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _cgi_env(
    repo_path: Path,
    method: str,
    path_info: str,
    service: str,
    hdrs: Mapping[str, str],
    remote_user: str,
    allow_push: bool,
    version: int,
    extra_env: Mapping[str, str],
    hooks_path: Path | None,
) -> dict[str, str]:
    env = _with_config(_base_env(extra_env), _safety_config(allow_push, hooks_path))
    for key in ("GIT_DIR", "GIT_PROTOCOL", "HTTP_GIT_PROTOCOL", "CONTENT_LENGTH", "HTTP_CONTENT_ENCODING"):
        env.pop(key, None)
    env.update(
        {
            "GIT_PROJECT_ROOT": str(repo_path.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            # Built from the repository we were given, never from the URL: no path can escape it.
            "PATH_INFO": f"/{repo_path.name}{path_info}",
            "REQUEST_METHOD": method,
            "QUERY_STRING": f"service={service}" if method == "GET" else "",
            "CONTENT_TYPE": hdrs.get("content-type", ""),
            "REMOTE_USER": remote_user,
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
    )
    if version:
        # Normalised, so the request parser below and upload-pack agree on the version.
        env["GIT_PROTOCOL"] = f"version={version}"
    return env


# --- the request side of upload-pack -------------------------------------------------------------


async def _gunzip(source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Inflate a gzip body in bounded steps (a small body can't balloon in memory at once)."""
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        async for chunk in source:
            data = chunk
            while True:
                out = inflater.decompress(data, CHUNK)
                if out:
                    yield out
                data = inflater.unconsumed_tail
                if not data and len(out) < CHUNK:
                    break
        tail = inflater.flush()
    except zlib.error as exc:
        raise _BadRequest(f"invalid gzip body: {exc}") from exc
    if tail:
        yield tail
    if not inflater.eof:
        raise _BadRequest("truncated gzip body")


class _PktReader:
    """Reads pkt-lines off a byte stream, remembering the raw bytes so they can be passed on."""

    def __init__(self, source: AsyncIterator[bytes]) -> None:
        self._source = source
        self._buffer = bytearray()
        self.consumed = 0

    async def _fill(self, size: int) -> bool:
        while len(self._buffer) < size:
            try:
                chunk = await anext(self._source)
            except StopAsyncIteration:
                return False
            self._buffer += chunk
        return True

    async def read(self) -> tuple[bytes, bytes] | None:
        """(raw bytes, payload) of the next packet; payload b"0000"/b"0001"/b"0002" for the special ones."""
        if not await self._fill(4):
            return None
        try:
            length = int(self._buffer[:4], 16)
        except ValueError:
            raise _BadRequest("bad pkt-line length") from None
        if length < 4:
            raw = bytes(self._buffer[:4])
            payload = raw
        else:
            if not await self._fill(length):
                return None
            raw = bytes(self._buffer[:length])
            payload = raw[4:]
        del self._buffer[: len(raw)]
        self.consumed += len(raw)
        if self.consumed > MAX_NEGOTIATION_BYTES:
            raise _BadRequest("negotiation too large")
        return raw, payload

    async def rest(self) -> AsyncIterator[bytes]:
        """The unread remainder, streamed."""
        if self._buffer:
            yield bytes(self._buffer)
            self._buffer.clear()
        async for chunk in self._source:
            yield chunk


def _want(payload: bytes) -> str | None:
    if not payload.startswith(b"want "):
        return None
    oid = payload[5:].split(b" ", 1)[0].strip().decode("ascii", "replace")
    if not _OID.fullmatch(oid):
        raise _BadRequest("malformed want line")
    return oid


async def _checked_upload_request(
    repo_path: Path, body: AsyncIterator[bytes], v2: bool, env: Mapping[str, str]
) -> AsyncIterator[bytes]:
    """Read the wants of an upload-pack request, refuse any unreachable one, return the bytes to feed.

    v0/v1: wants come first and end at the first flush; nothing after it can add one (upload-pack
    dies on a late want), so the rest streams straight through. v2: one command per HTTP request;
    its arguments end at the flush and are read whole (wants and haves may interleave).
    """
    reader = _PktReader(body)
    prefix: list[bytes] = []
    wants: list[str] = []
    if v2:
        command = None
        in_args = False
        async for payload in _until_flush(reader, prefix):
            if payload == b"0001":
                in_args = True
                continue
            line = payload.rstrip(b"\n")
            if not in_args and line.startswith(b"command="):
                if command is not None:
                    raise _BadRequest("more than one command")
                command = line[len(b"command=") :].decode("ascii", "replace")
            elif (oid := _want(line)) is not None:  # a want outside the arguments is checked all the same
                wants.append(oid)
        if command not in ("ls-refs", "fetch"):
            raise _Refused(f"upload-pack: command '{command}' is not served here")
        # Anything after the flush would be a second command, which stateless upload-pack ignores.
        stdin = _once(b"".join(prefix))
    else:
        async for payload in _until_flush(reader, prefix):
            if (oid := _want(payload.rstrip(b"\n"))) is not None:
                wants.append(oid)
        stdin = _chain(b"".join(prefix), reader.rest())
    unreachable = await _unreachable(repo_path, wants, env)
    if unreachable:
        raise _Refused(f"upload-pack: not our ref {unreachable[0]}")
    return stdin


async def _until_flush(reader: _PktReader, prefix: list[bytes]) -> AsyncIterator[bytes]:
    """The payloads of the packets before the first flush, each packet's raw bytes kept in ``prefix``
    (to be fed to upload-pack as they came)."""
    while True:
        packet = await reader.read()
        if packet is None:
            raise _BadRequest("request ends before its flush packet")
        raw, payload = packet
        prefix.append(raw)
        if payload == b"0000":
            return
        yield payload


async def _chain(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


async def _git_output(repo_path: Path, env: Mapping[str, str], *args: str, stdin: bytes = b"") -> bytes:
    git_env = {k: v for k, v in env.items() if k not in ("GIT_PROJECT_ROOT", "PATH_INFO", "GIT_PROTOCOL")}
    git_env["GIT_DIR"] = str(repo_path)
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        # Nothing to send: no pipe. Under uvloop, writing even b"" to a command that already exited
        # raises instead of being ignored.
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=git_env,
    )
    out, err = await proc.communicate(stdin or None)
    if proc.returncode not in (0, 1):  # show-ref exits 1 in an empty repository
        log.error("git %s failed in %s: %s", args[0], repo_path.name, err.decode(errors="replace").strip())
        raise _Refused("upload-pack: could not check the request")
    return out


async def _unreachable(repo_path: Path, wants: list[str], env: Mapping[str, str]) -> list[str]:
    """The wants that are neither a ref tip nor a commit reachable from one."""
    if not wants:
        return []
    tips_out = await _git_output(repo_path, env, "show-ref", "--head")
    tips = {line.split(" ", 1)[0] for line in tips_out.decode().splitlines() if line}
    others = list(dict.fromkeys(w for w in wants if w not in tips))
    if not others:
        return []
    types_out = await _git_output(
        repo_path, env, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin="\n".join(others).encode()
    )
    types = dict(line.split(" ", 1) for line in types_out.decode().splitlines() if " " in line)
    # Trees and blobs are served only as part of a reachable commit or tag (allowFilter is off).
    commits = [oid for oid in others if types.get(oid) == "commit"]
    refused = [oid for oid in others if types.get(oid) != "commit"]
    if commits:
        outside = await _git_output(
            repo_path, env, "rev-list", "--stdin", "--not", "--all", stdin="\n".join(commits).encode()
        )
        outside_set = set(outside.decode().split())
        refused.extend(c for c in commits if c in outside_set)
    return refused


def _pkt(payload: bytes) -> bytes:
    return b"%04x" % (len(payload) + 4) + payload


def _err_packet_response(message: str) -> GitResponse:
    # upload-pack's own way of refusing: Git prints "remote error: <message>" and stops.
    body = _pkt(f"ERR {message}\n".encode())
    return GitResponse(
        200,
        [
            ("Content-Type", f"application/x-{UPLOAD_PACK}-result"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-cache, max-age=0, must-revalidate"),
        ],
        _once(body),
    )


# --- running http-backend ------------------------------------------------------------------------


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
    assert proc.stdin is not None
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
    assert proc.stderr is not None
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
        assert self._proc.stdout is not None
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


async def _run_backend(repo_path: Path, env: dict[str, str], stdin: AsyncIterator[bytes] | None) -> GitResponse:
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
    assert proc.stdout is not None
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
