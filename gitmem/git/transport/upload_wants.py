"""The request side of upload-pack: every want is checked against the refs before Git runs.

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
import logging
import re
import zlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from gitmem.git.transport.http_backend import CHUNK, GitResponse, once

log = logging.getLogger(__name__)


UPLOAD_PACK = "git-upload-pack"
# http-backend buffers an upload-pack request itself and refuses one past http.maxRequestBuffer
# (10 MiB by default), so reading the negotiation here to check its wants costs no more than that.
MAX_NEGOTIATION_BYTES = 10 * 1024 * 1024
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class Refused(Exception):
    """A request upload-pack must not see; the message goes to the client as an ERR packet."""


class BadRequest(Exception):
    """A malformed request body."""


async def gunzip(source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
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
        raise BadRequest(f"invalid gzip body: {exc}") from exc
    if tail:
        yield tail
    if not inflater.eof:
        raise BadRequest("truncated gzip body")


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
            raise BadRequest("bad pkt-line length") from None
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
            raise BadRequest("negotiation too large")
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
        raise BadRequest("malformed want line")
    return oid


async def checked_upload_request(
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
                    raise BadRequest("more than one command")
                command = line[len(b"command=") :].decode("ascii", "replace")
            elif (oid := _want(line)) is not None:  # a want outside the arguments is checked all the same
                wants.append(oid)
        if command not in ("ls-refs", "fetch"):
            raise Refused(f"upload-pack: command '{command}' is not served here")
        # Anything after the flush would be a second command, which stateless upload-pack ignores.
        stdin = once(b"".join(prefix))
    else:
        async for payload in _until_flush(reader, prefix):
            if (oid := _want(payload.rstrip(b"\n"))) is not None:
                wants.append(oid)
        stdin = _chain(b"".join(prefix), reader.rest())
    unreachable = await _unreachable(repo_path, wants, env)
    if unreachable:
        raise Refused(f"upload-pack: not our ref {unreachable[0]}")
    return stdin


async def _until_flush(reader: _PktReader, prefix: list[bytes]) -> AsyncIterator[bytes]:
    """The payloads of the packets before the first flush, each packet's raw bytes kept in ``prefix``
    (to be fed to upload-pack as they came)."""
    while True:
        packet = await reader.read()
        if packet is None:
            raise BadRequest("request ends before its flush packet")
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
        raise Refused("upload-pack: could not check the request")
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


def err_packet_response(message: str) -> GitResponse:
    # upload-pack's own way of refusing: Git prints "remote error: <message>" and stops.
    body = _pkt(f"ERR {message}\n".encode())
    return GitResponse(
        200,
        [
            ("Content-Type", f"application/x-{UPLOAD_PACK}-result"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-cache, max-age=0, must-revalidate"),
        ],
        once(body),
    )
