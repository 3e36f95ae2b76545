"""Git smart HTTP: the real git client against a real uvicorn serving real bare repositories.

The module also holds the minimal raw ASGI app under test (no framework), which uvicorn imports in
a subprocess; its server process is what the memory and disconnect tests measure.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from gitmem.api.routers.stores.git import AsgiBody, send_git_response
from gitmem.git.transport.smart_http import (
    PUSH_REFUSED_MESSAGE,
    GitResponse,
    basic_auth_secret,
    serve_git,
    unauthorized_response,
)
from tests import REPO_ROOT

# The real git client against a real uvicorn: the network is the point.
pytestmark = pytest.mark.slow

SECRET = "gmk_test_0123456789abcdef"
ROOT_ENV = "GITMEM_SMART_HTTP_TEST_ROOT"
HERE = Path(__file__).resolve().parent
PROJECT = REPO_ROOT
MiB = 1024 * 1024

# --- the ASGI app under test -----------------------------------------------------------------------

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_STORE_URL = re.compile(r"/v1/memory_stores/([A-Za-z0-9_-]+)\.git(/.*)")


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body = AsgiBody(receive, scope["method"] == "POST")
    match = _STORE_URL.fullmatch(scope["path"])
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    if match is None:
        response = GitResponse(404, [("Content-Type", "text/plain")])
    elif basic_auth_secret(headers) != SECRET:
        response = unauthorized_response()
    else:
        store, path_info = match.groups()
        response = await serve_git(
            Path(os.environ[ROOT_ENV]) / f"{store}.git",
            method=scope["method"],
            path_info=path_info,
            query_string=scope["query_string"].decode("latin-1"),
            headers=headers,
            body=body.chunks(),
            remote_user="user_test",
            allow_push=store.startswith("rw_"),
        )
    await send_git_response(response, send, body)


# --- fixtures and helpers --------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    root: Path
    pid: int
    env: dict[str, str]

    def store_url(self, store: str) -> str:
        return f"{self.url}/v1/memory_stores/{store}.git"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("stores")
    home = tmp_path_factory.mktemp("home")
    client_env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Sam",
        "GIT_AUTHOR_EMAIL": "sam@example.com",
        "GIT_COMMITTER_NAME": "Sam",
        "GIT_COMMITTER_EMAIL": "sam@example.com",
    }
    port = _free_port()
    server_env = {**os.environ, ROOT_ENV: str(root), "PYTHONPATH": str(PROJECT)}
    log_path = root / "server.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--app-dir",
                str(HERE),
                "test_smart_http:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--lifespan",
                "off",
                "--log-level",
                "warning",
            ],
            env=server_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start:\n{log_path.read_text()}")
            time.sleep(0.05)
        yield Server(f"http://127.0.0.1:{port}", root, proc.pid, client_env)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def git(
    server: Server, *args: str, cwd: Path | None = None, check: bool = True, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**server.env, **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result


def helper_config(password: str = SECRET) -> list[str]:
    """A credential helper handing Git the key as the Basic password (it never appears in a URL)."""
    return [
        "-c",
        "credential.helper=",
        "-c",
        f"credential.helper=!f() {{ echo username=agent; echo password={password}; }}; f",
    ]


def make_store(server: Server, store: str, files: dict[str, bytes], tmp_path: Path) -> Path:
    bare = server.root / f"{store}.git"
    git(server, "init", "-q", "--bare", "-b", "main", str(bare))
    work = tmp_path / f"seed-{store}"
    git(server, "clone", "-q", str(bare), str(work))
    commit_files(server, work, files, "seed")
    git(server, "push", "-q", "origin", "HEAD:main", cwd=work)
    return bare


def commit_files(server: Server, work: Path, files: dict[str, bytes], message: str) -> str:
    for name, content in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(content)
    git(server, "add", "-A", cwd=work)
    git(server, "commit", "-q", "-m", message, cwd=work)
    return git(server, "rev-parse", "HEAD", cwd=work).stdout.strip()


def basic(password: str = SECRET) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"agent:{password}".encode()).decode()}


def pkt(line: str) -> bytes:
    data = line.encode()
    return b"%04x" % (len(data) + 4) + data


def v2_fetch_request(*wants: str) -> bytes:
    return (
        pkt("command=fetch\n")
        + pkt("object-format=sha1\n")
        + b"0001"
        + pkt("no-progress\n")
        + b"".join(pkt(f"want {w}\n") for w in wants)
        + pkt("done\n")
        + b"0000"
    )


def v0_fetch_request(*wants: str) -> bytes:
    lines = [f"want {w}{' no-progress ofs-delta' if i == 0 else ''}\n" for i, w in enumerate(wants)]
    return b"".join(pkt(line) for line in lines) + b"0000" + pkt("done\n")


def upload_pack(server: Server, store: str, request: bytes, *, v2: bool, gzipped: bool = False) -> bytes:
    headers = {"Content-Type": "application/x-git-upload-pack-request", **basic()}
    if v2:
        headers["Git-Protocol"] = "version=2"
    if gzipped:
        request = gzip.compress(request)
        headers["Content-Encoding"] = "gzip"
    response = httpx.post(f"{server.store_url(store)}/git-upload-pack", content=request, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.content


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(stat.parent.name))
    return found


# --- unit tests (no server) ------------------------------------------------------------------------


def test_basic_auth_secret_reads_password_bearer_and_api_key() -> None:
    assert basic_auth_secret(basic("k1")) == "k1"
    token_as_user = {"authorization": "Basic " + base64.b64encode(b"k2:").decode()}
    assert basic_auth_secret(token_as_user) == "k2"
    assert basic_auth_secret({"Authorization": "Bearer k3"}) == "k3"
    assert basic_auth_secret({"x-api-key": "k4"}) == "k4"
    assert basic_auth_secret({}) is None
    assert basic_auth_secret({"authorization": "Basic !!notbase64"}) is None


def test_unauthorized_response_challenges_basic() -> None:
    response = unauthorized_response()
    assert response.status == 401
    assert ("WWW-Authenticate", 'Basic realm="gitmem"') in response.headers


def test_routing_refuses_dumb_http_without_touching_git(tmp_path: Path) -> None:
    async def status(method: str, path_info: str, query: str = "") -> int:
        response = await serve_git(
            tmp_path / "missing.git",
            method=method,
            path_info=path_info,
            query_string=query,
            headers={},
            body=_no_body(),
            remote_user="u",
            allow_push=False,
        )
        await response.aclose()
        return response.status

    async def main() -> None:
        assert await status("GET", "/HEAD") == 404
        assert await status("GET", "/info/refs") == 404
        assert await status("GET", "/info/refs", "service=git-upload-archive") == 404
        assert await status("GET", "/objects/info/packs") == 404
        assert await status("GET", "/git-upload-pack") == 405
        assert await status("POST", "/git-receive-pack") == 403
        assert await status("GET", "/info/refs", "service=git-receive-pack") == 403
        assert await status("GET", "/info/refs", "service=git-upload-pack") == 404  # no such store

    asyncio.run(main())


async def _no_body() -> AsyncIterator[bytes]:
    return
    yield b""


# --- end to end ------------------------------------------------------------------------------------


def test_clone_fetch_and_pull_with_key_as_basic_password(server: Server, tmp_path: Path) -> None:
    bare = make_store(server, "ro_notes", {"people/sam.md": b"likes tea\n"}, tmp_path)
    url = server.store_url("ro_notes")
    clone = tmp_path / "clone"
    git(server, *helper_config(), "clone", "-q", url, str(clone))
    assert (clone / "people/sam.md").read_bytes() == b"likes tea\n"
    assert SECRET not in (clone / ".git/config").read_text()

    writer = tmp_path / "writer"
    git(server, "clone", "-q", str(bare), str(writer))
    new_tip = commit_files(server, writer, {"people/ana.md": b"likes coffee\n"}, "add ana")
    # Forty annotated tags make the fetch request (one want each) big enough for Git to gzip it.
    for i in range(40):
        git(server, "tag", "-a", "-m", f"tag {i}", f"t{i}", cwd=writer)
    git(server, "push", "-q", "--tags", "origin", "HEAD:main", cwd=writer)

    fetched = git(server, *helper_config(), "fetch", "--tags", "origin", cwd=clone, GIT_TRACE_CURL="1")
    assert "Content-Encoding: gzip" in fetched.stderr
    assert git(server, "cat-file", "-t", "t39", cwd=clone).stdout.strip() == "tag"
    assert git(server, "rev-parse", "origin/main", cwd=clone).stdout.strip() == new_tip

    commit_files(server, writer, {"people/sam.md": b"likes green tea\n"}, "update sam")
    git(server, "push", "-q", "origin", "HEAD:main", cwd=writer)
    git(server, *helper_config(), "pull", "-q", "--ff-only", "origin", "main", cwd=clone)
    assert (clone / "people/sam.md").read_bytes() == b"likes green tea\n"
    assert (clone / "people/ana.md").read_bytes() == b"likes coffee\n"

    for header in (f"Authorization: Bearer {SECRET}", f"x-api-key: {SECRET}"):
        other = tmp_path / f"clone-{header.split(':')[0]}"
        git(server, "-c", f"http.extraHeader={header}", "clone", "-q", url, str(other))
        assert (other / "people/ana.md").exists()


def test_missing_or_wrong_key_is_401(server: Server, tmp_path: Path) -> None:
    make_store(server, "ro_secret", {"a.md": b"a\n"}, tmp_path)
    url = server.store_url("ro_secret")
    refs = f"{url}/info/refs?service=git-upload-pack"

    anonymous = httpx.get(refs)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == 'Basic realm="gitmem"'
    assert httpx.get(refs, headers=basic("wrong")).status_code == 401
    assert httpx.get(refs, headers=basic()).status_code == 200

    no_key = git(server, "clone", url, str(tmp_path / "a"), check=False)
    assert no_key.returncode != 0 and not (tmp_path / "a").exists()
    wrong = git(server, *helper_config("wrong"), "clone", url, str(tmp_path / "b"), check=False)
    assert wrong.returncode != 0 and "Authentication failed" in wrong.stderr


def test_push_refused_without_write_access(server: Server, tmp_path: Path) -> None:
    bare = make_store(server, "ro_push", {"a.md": b"a\n"}, tmp_path)
    before = git(server, "--git-dir", str(bare), "rev-parse", "main").stdout
    clone = tmp_path / "clone"
    git(server, *helper_config(), "clone", "-q", server.store_url("ro_push"), str(clone))
    commit_files(server, clone, {"a.md": b"b\n"}, "edit")
    pushed = git(server, *helper_config(), "push", "origin", "HEAD:main", cwd=clone, check=False)
    assert pushed.returncode != 0
    assert f"remote: {PUSH_REFUSED_MESSAGE}" in pushed.stderr
    assert git(server, "--git-dir", str(bare), "rev-parse", "main").stdout == before

    direct = httpx.post(
        f"{server.store_url('ro_push')}/git-receive-pack",
        content=b"0000",
        headers={"Content-Type": "application/x-git-receive-pack-request", **basic()},
    )
    assert direct.status_code == 403


def test_push_fast_forward_with_write_access(server: Server, tmp_path: Path) -> None:
    bare = make_store(server, "rw_push", {"a.md": b"a\n"}, tmp_path)
    clone = tmp_path / "clone"
    git(server, *helper_config(), "clone", "-q", server.store_url("rw_push"), str(clone))
    tip = commit_files(server, clone, {"a.md": b"b\n", "b.md": b"new\n"}, "edit")
    git(server, *helper_config(), "push", "-q", "origin", "HEAD:main", cwd=clone)
    assert git(server, "--git-dir", str(bare), "rev-parse", "main").stdout.strip() == tip

    git(server, "reset", "-q", "--hard", "HEAD~1", cwd=clone)
    commit_files(server, clone, {"c.md": b"rewrite\n"}, "rewrite")
    forced = git(server, *helper_config(), "push", "--force", "origin", "HEAD:main", cwd=clone, check=False)
    assert forced.returncode != 0 and "non-fast-forward" in forced.stderr
    assert git(server, "--git-dir", str(bare), "rev-parse", "main").stdout.strip() == tip


def test_gzipped_push_is_inflated(server: Server, tmp_path: Path) -> None:
    bare = make_store(server, "rw_gzip", {"a.md": b"a\n"}, tmp_path)
    old = git(server, "--git-dir", str(bare), "rev-parse", "main").stdout.strip()
    work = tmp_path / "work"
    git(server, "clone", "-q", str(bare), str(work))
    new = commit_files(server, work, {"b.md": b"pushed gzipped\n"}, "gzip")
    pack = subprocess.run(
        ["git", "pack-objects", "--stdout", "--revs", "-q"],
        cwd=work,
        input=f"{new}\n^{old}\n".encode(),
        capture_output=True,
        check=True,
    ).stdout
    request = pkt(f"{old} {new} refs/heads/main\0report-status\n") + b"0000" + pack
    response = httpx.post(
        f"{server.store_url('rw_gzip')}/git-receive-pack",
        content=gzip.compress(request),
        headers={
            "Content-Type": "application/x-git-receive-pack-request",
            "Content-Encoding": "gzip",
            **basic(),
        },
    )
    assert response.status_code == 200
    assert b"unpack ok" in response.content and b"ok refs/heads/main" in response.content
    assert git(server, "--git-dir", str(bare), "rev-parse", "main").stdout.strip() == new


def test_dumb_http_paths_are_404(server: Server, tmp_path: Path) -> None:
    bare = make_store(server, "ro_dumb", {"a.md": b"a\n"}, tmp_path)
    blob = git(server, "--git-dir", str(bare), "rev-parse", "main:a.md").stdout.strip()
    git(server, "--git-dir", str(bare), "repack", "-q", "-d")
    pack = next((bare / "objects/pack").glob("*.pack")).name
    git(server, "--git-dir", str(bare), "update-server-info")  # even with the dumb files present
    url = server.store_url("ro_dumb")
    for path in (
        "/HEAD",
        "/info/refs",
        "/info/refs?service=git-upload-archive",
        "/objects/info/packs",
        f"/objects/{blob[:2]}/{blob[2:]}",
        f"/objects/pack/{pack}",
        "/config",
    ):
        assert httpx.get(url + path, headers=basic()).status_code == 404, path
    assert httpx.get(f"{url}/git-upload-pack", headers=basic()).status_code == 405


@pytest.mark.parametrize("protocol", ["2", "0"])
def test_unreachable_objects_are_never_served(server: Server, tmp_path: Path, protocol: str) -> None:
    store = f"ro_unreachable_v{protocol}"
    bare = make_store(server, store, {"a.md": b"first\n"}, tmp_path)
    gitdir = ("--git-dir", str(bare))
    old_tip = git(server, *gitdir, "rev-parse", "main").stdout.strip()
    writer = tmp_path / "writer"
    git(server, "clone", "-q", str(bare), str(writer))
    commit_files(server, writer, {"a.md": b"second\n"}, "second")
    git(server, "push", "-q", "origin", "HEAD:main", cwd=writer)

    # What a redaction leaves behind until the objects are physically deleted.
    blob_id = git(server, *gitdir, "hash-object", "-w", "--stdin", stdin="dropped note\n").stdout.strip()
    tree = git(server, *gitdir, "mktree", stdin=f"100644 blob {blob_id}\tsecret.md\n").stdout.strip()
    commit = git(server, *gitdir, "commit-tree", tree, "-p", old_tip, "-m", "dropped").stdout.strip()

    clone = tmp_path / "clone"
    git(server, *helper_config(), "clone", "-q", server.store_url(store), str(clone))
    for oid in (blob_id, tree, commit):
        fetched = git(
            server,
            "-c",
            f"protocol.version={protocol}",
            *helper_config(),
            "fetch",
            "origin",
            oid,
            cwd=clone,
            check=False,
        )
        assert fetched.returncode != 0, oid
        if protocol == "2":
            assert f"not our ref {oid}" in fetched.stderr
        assert git(server, "cat-file", "-e", oid, cwd=clone, check=False).returncode != 0

        # A hand-made request gets the same answer from the server, whatever the client checks.
        request = v2_fetch_request(oid) if protocol == "2" else v0_fetch_request(oid)
        answer = upload_pack(server, store, request, v2=protocol == "2")
        assert answer.startswith(pkt(f"ERR upload-pack: not our ref {oid}\n")) and b"PACK" not in answer

    # Reachable objects still come: the tip, and (v2) an older commit asked for by id.
    tip = git(server, *gitdir, "rev-parse", "main").stdout.strip()
    request = v2_fetch_request(tip) if protocol == "2" else v0_fetch_request(tip)
    assert b"PACK" in upload_pack(server, store, request, v2=protocol == "2", gzipped=True)
    if protocol == "2":
        git(server, "-c", "protocol.version=2", *helper_config(), "fetch", "origin", old_tip, cwd=clone)
        object_info = pkt("command=object-info\n") + b"0001" + pkt("size\n") + pkt(f"oid {blob_id}\n") + b"0000"
        answer = upload_pack(server, store, object_info, v2=True)
        assert answer[4:].startswith(b"ERR upload-pack: command 'object-info' is not served")


def test_large_clone_streams_in_bounded_memory(server: Server, tmp_path: Path) -> None:
    files = {f"blobs/{i:02}.bin": os.urandom(MiB) for i in range(20)}  # incompressible: a 20 MB pack
    make_store(server, "ro_big", files, tmp_path)
    status = Path(f"/proc/{server.pid}/status")

    def peak_rss() -> int:
        found = re.search(r"VmHWM:\s+(\d+) kB", status.read_text())
        assert found is not None, status.read_text()
        return int(found[1]) * 1024

    with contextlib.suppress(OSError):
        Path(f"/proc/{server.pid}/clear_refs").write_text("5")  # reset the peak, where allowed
    before = peak_rss()
    started = time.monotonic()
    clone = tmp_path / "big"
    git(server, *helper_config(), "clone", "-q", server.store_url("ro_big"), str(clone))
    assert time.monotonic() - started < 20
    assert (clone / "blobs/19.bin").read_bytes() == files["blobs/19.bin"]
    grown = peak_rss() - before
    assert grown < 8 * MiB, f"server peak RSS grew by {grown / MiB:.1f} MiB for a 20 MiB clone"


def test_client_disconnect_stops_git(server: Server, tmp_path: Path) -> None:
    if not (server.root / "ro_big.git").exists():
        make_store(server, "ro_big", {f"blobs/{i:02}.bin": os.urandom(MiB) for i in range(20)}, tmp_path)
    tip = git(server, "--git-dir", str(server.root / "ro_big.git"), "rev-parse", "main").stdout.strip()
    request = v2_fetch_request(tip)
    head = (
        f"POST /v1/memory_stores/ro_big.git/git-upload-pack HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: {basic()['Authorization']}\r\nGit-Protocol: version=2\r\n"
        f"Content-Type: application/x-git-upload-pack-request\r\nContent-Length: {len(request)}\r\n\r\n"
    ).encode()
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(head + request)
        received = b""
        while b"PACK" not in received:
            received += sock.recv(64 * 1024)
        assert children(server.pid), "git should still be streaming the pack"
    deadline = time.monotonic() + 10
    while children(server.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children(server.pid) == []


def test_client_disconnect_mid_push_stops_git(server: Server, tmp_path: Path) -> None:
    make_store(server, "rw_abort", {"a.md": b"a\n"}, tmp_path)
    zero = "0" * 40
    start = pkt(f"{zero} {'ab' * 20} refs/heads/other\0report-status\n") + b"0000" + b"PACK\0\0\0\2\0\0\1\0"
    head = (
        f"POST /v1/memory_stores/rw_abort.git/git-receive-pack HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: {basic()['Authorization']}\r\n"
        f"Content-Type: application/x-git-receive-pack-request\r\nContent-Length: {50 * MiB}\r\n\r\n"
    ).encode()
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + start)
        deadline = time.monotonic() + 10
        while not children(server.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert children(server.pid), "receive-pack should be waiting for the rest of the pack"
    deadline = time.monotonic() + 10
    while children(server.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children(server.pid) == []
