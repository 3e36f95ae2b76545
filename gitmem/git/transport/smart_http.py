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

Unreachable objects are never served: :mod:`gitmem.git.transport.upload_wants` checks every want against the refs
before upload-pack starts (the reasons are there); :mod:`gitmem.git.transport.http_backend` runs the backend.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from urllib.parse import parse_qs

from gitmem.git import repository
from gitmem.git.transport.http_backend import GitResponse, run_backend, text_response
from gitmem.git.transport.upload_wants import (
    UPLOAD_PACK,
    BadRequest,
    Refused,
    checked_upload_request,
    err_packet_response,
    gunzip,
)

__all__ = [
    "PUSH_REFUSED_MESSAGE",
    "REALM",
    "GitResponse",
    "basic_auth_secret",
    "forbidden_response",
    "serve_git",
    "text_response",
    "unauthorized_response",
]

log = logging.getLogger(__name__)

REALM = "gitmem"
RECEIVE_PACK = "git-receive-pack"
# Environment a git subprocess may inherit; everything else (GIT_DIR, GIT_CONFIG_*, ...) is dropped.
_INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")

PUSH_REFUSED_MESSAGE = "gitmem: push refused: this credential may read this memory store but not write to it"


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
    extra_env: Mapping[str, str] = {},  # read only
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
            body = gunzip(body)  # decoded here, so the wants can be read; http-backend gets plain bytes
        elif encoding not in ("", "identity"):
            return text_response(415, f"gitmem: unsupported Content-Encoding {encoding!r}")
        try:
            stdin = await checked_upload_request(repo_path, body, version == 2, env)
        except Refused as refused:
            log.warning("upload-pack request refused on %s: %s", repo_path.name, refused)
            return err_packet_response(str(refused))
        except BadRequest as bad:
            return text_response(400, f"gitmem: bad upload-pack request: {bad}")
    elif method == "POST":
        if encoding in ("gzip", "x-gzip"):
            env["HTTP_CONTENT_ENCODING"] = "gzip"  # http-backend inflates it (run_service)
        elif encoding not in ("", "identity"):
            return text_response(415, f"gitmem: unsupported Content-Encoding {encoding!r}")
        stdin = body

    log.debug("git %s %s%s for %s", method, repo_path.name, path_info, remote_user)
    return await run_backend(repo_path, env, stdin)


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
        "uploadpack.hideRefs": repository.HIDDEN_REFS,
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
