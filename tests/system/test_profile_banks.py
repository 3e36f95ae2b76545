"""The profile and bank REST API: ownership, every bank rule and cap in the error envelope,
created/changed flags, the prompt section (against the app served in this process); and, over a real
uvicorn on 127.0.0.1 where the network is the point, the CLI's prompt, a mount of a bank
(``BankRemote`` + :class:`gitmem.sync.mount.Mount`) and the agent session hooks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from gitmem.banks.profiles import profiles_for
from gitmem.engine.gitmem import Gitmem
from tests import REPO_ROOT
from tests.apps import InProcess, in_process
from tests.checks import no_sockets_left
from tests.server import serve

KIB = 1024
MIB = 1024 * 1024
HOOKS = REPO_ROOT / "hooks" / "agent"


# -- fixtures ---------------------------------------------------------------------------------------------


@dataclass
class Env:
    server: InProcess
    home: Path
    gm: Gitmem
    workspace_id: str
    sam: str  # a user's token
    sam_id: str
    alex: str  # another user's token
    api_key: str

    def client(self, token: str) -> httpx.Client:
        return self.server.http(token, bearer=True)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    home = tmp_path_factory.mktemp("profiles-api") / "home"
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.create_workspace("people")
    sam, sam_token = gm.catalog.create_user(ws.id, "sam")
    _alex, alex_token = gm.catalog.create_user(ws.id, "alex")
    _key, secret = gm.catalog.create_api_key(ws.id, "robot")
    with in_process(gm) as server:
        yield Env(server, home, gm, ws.id, sam_token, sam.id, alex_token, secret)


@pytest.fixture(scope="module")
def url(env: Env) -> Iterator[str]:
    """A real uvicorn on the same home, for the clients that run over the network (CLI, Git, hooks)."""
    with serve(env.home, env={"GITMEM_RATE_LIMIT_RPS": "0", "GITMEM_FSYNC": "never"}) as base_url:
        yield base_url


@pytest.fixture
def sam(env: Env) -> Iterator[httpx.Client]:
    with env.client(env.sam) as client:
        yield client


@pytest.fixture
def profile_id(sam: httpx.Client) -> str:
    response = sam.post("/v1/profiles", json={"name": "research"})
    assert response.status_code == 200, response.text
    found: str = response.json()["id"]
    return found


def put(client: httpx.Client, profile_id: str, path: str, content: str, **headers: str) -> httpx.Response:
    return client.put(
        f"/v1/profiles/{profile_id}/memories/content", params={"path": path}, json={"content": content}, headers=headers
    )


def error(response: httpx.Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == kind and body["request_id"].startswith("req_")
    message: str = body["error"]["message"]
    return message


def wait_for(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


# -- profiles --------------------------------------------------------------------------------------------


def test_profile_lifecycle(env: Env, sam: httpx.Client) -> None:
    created = sam.post("/v1/profiles", json={"name": "reporting"}).json()
    assert created["type"] == "profile" and created["name"] == "reporting"
    assert created["id"].startswith("profile_") and created["memory_bank_id"].startswith("memstore_")
    assert sam.get(f"/v1/profiles/{created['id']}").json() == created
    assert created["id"] in [p["id"] for p in sam.get("/v1/profiles").json()["data"]]
    renamed = sam.post(f"/v1/profiles/{created['id']}", json={"name": "reports"}).json()
    assert renamed["name"] == "reports"
    repo = env.gm.repo_path(created["memory_bank_id"])
    assert repo.is_dir()
    assert sam.delete(f"/v1/profiles/{created['id']}").json() == {"id": created["id"], "type": "profile_deleted"}
    error(sam.get(f"/v1/profiles/{created['id']}"), 404, "not_found_error")
    assert not repo.exists()
    assert created["memory_bank_id"] not in (env.home / "keys.json").read_text()
    error(sam.post("/v1/profiles", json={}), 400, "invalid_request_error")
    error(sam.post("/v1/profiles", json={"name": ""}), 400, "invalid_request_error")
    error(sam.post("/v1/profiles", json={"name": "x", "extra": 1}), 400, "invalid_request_error")


def test_another_users_profile_is_404(env: Env, sam: httpx.Client, profile_id: str) -> None:
    assert put(sam, profile_id, "mine.md", "sam's").status_code == 200
    with env.client(env.alex) as alex:
        base = f"/v1/profiles/{profile_id}"
        for response in (
            alex.get(base),
            alex.get(f"{base}/memories"),
            alex.get(f"{base}/prompt"),
            alex.get(f"{base}/memories/content", params={"path": "mine.md"}),
            put(alex, profile_id, "mine.md", "alex's"),
            alex.post(base, json={"name": "taken"}),
            alex.delete(f"{base}/memories/content", params={"path": "mine.md"}),
            alex.delete(base),
        ):
            error(response, 404, "not_found_error")
        assert profile_id not in [p["id"] for p in alex.get("/v1/profiles").json()["data"]]
    assert (
        sam.get(f"/v1/profiles/{profile_id}/memories/content", params={"path": "mine.md"}).json()["content"] == "sam's"
    )


def test_api_keys_and_strangers_cannot_use_profiles(env: Env, profile_id: str) -> None:
    with env.client(env.api_key) as robot:
        assert "user" in error(robot.get("/v1/profiles"), 403, "permission_error")
        error(robot.post("/v1/profiles", json={"name": "x"}), 403, "permission_error")
        error(robot.get(f"/v1/profiles/{profile_id}/memories"), 403, "permission_error")
    with env.client("gm_usr_not-a-token") as nobody:
        error(nobody.get("/v1/profiles"), 401, "authentication_error")
    with env.server.http() as anonymous:
        error(anonymous.get("/v1/profiles"), 401, "authentication_error")


# -- the bank's REST API ---------------------------------------------------------------------------------


def test_seed_walkthrough(env: Env, sam: httpx.Client, profile_id: str) -> None:
    base = f"/v1/profiles/{profile_id}/memories"
    assert sam.get(base).json() == {"memories": []}
    content = "## Acme Corp\n- single-tenant deployment\n- compliance: SOC2"
    first = put(sam, profile_id, "projects/acme.md", content)
    assert first.status_code == 200
    body = first.json()
    assert body["path"] == "projects/acme.md" and body["created"] is True and body["changed"] is True
    assert body["size"] == len(content) and len(body["content_hash"]) == 64
    same = put(sam, profile_id, "projects/acme.md", content).json()
    assert (same["created"], same["changed"]) == (False, False)
    edited = put(sam, profile_id, "projects/acme.md", content + "\n- renewal in May").json()
    assert (edited["created"], edited["changed"]) == (False, True)
    put(sam, profile_id, "preferences.md", "always run terraform plans against staging first")
    listing = sam.get(base).json()["memories"]
    assert [m["path"] for m in listing] == ["preferences.md", "projects/acme.md"]
    assert set(listing[0]) == {"path", "size", "content_hash", "created_at", "updated_at"}
    assert listing[0]["created_at"].endswith("Z")
    read = sam.get(f"{base}/content", params={"path": "projects/acme.md"})
    assert read.json()["content"] == content + "\n- renewal in May"
    assert read.json()["path"] == "projects/acme.md"
    # curl --data-urlencode style: the path's slash percent-encoded in the query.
    raw = sam.get(f"{base}/content?path=projects%2Facme.md")
    assert raw.json()["content"] == read.json()["content"]
    gone = sam.delete(f"{base}/content", params={"path": "projects/acme.md"})
    assert gone.json() == {"path": "projects/acme.md", "deleted": True}
    error(sam.get(f"{base}/content", params={"path": "projects/acme.md"}), 404, "not_found_error")
    error(sam.delete(f"{base}/content", params={"path": "projects/acme.md"}), 404, "not_found_error")
    error(sam.get(f"{base}/content"), 400, "invalid_request_error")  # no path
    error(sam.put(f"{base}/content", params={"path": "x.md"}, json={}), 400, "invalid_request_error")
    error(sam.put(f"{base}/content", params={"path": "x.md"}, json={"content": 5}), 400, "invalid_request_error")
    # Versions: no version for the no-op, and every write is the user's.
    info = profiles_for(env.gm).get(env.workspace_id, env.sam_id, profile_id)
    versions = env.gm.store(env.workspace_id, info.bank_store_id).versions(limit=100).items
    assert [v.operation for v in versions] == ["deleted", "created", "modified", "created"]
    assert {(v.created_by and v.created_by.type, v.created_by and v.created_by.id) for v in versions} == {
        ("user_actor", env.sam_id)
    }


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("bad name.md", "only A-Z a-z 0-9"),
        ("notes/caf\u00e9.md", "only A-Z a-z 0-9"),
        (".hidden", "starts with '.'"),
        ("notes/.x.md.swp", "starts with '.'"),
        ("../outside.md", "starts with '.'"),
        ("a/../../b.md", "starts with '.'"),
        ("a/b/c/d/e/f.md", "more than 5 segments"),
        ("x" * 257, "longer than 256"),
        ("/abs.md", "relative"),
        ("", "required"),
    ],
)
def test_bank_path_rules(sam: httpx.Client, profile_id: str, path: str, why: str) -> None:
    message = error(put(sam, profile_id, path, "x"), 400, "invalid_request_error")
    assert "invalid path" in message and why in message
    error(sam.get(f"/v1/profiles/{profile_id}/memories/content", params={"path": path}), 400, "invalid_request_error")
    assert sam.get(f"/v1/profiles/{profile_id}/memories").json() == {"memories": []}


def test_bank_limits_at_the_edges(sam: httpx.Client, profile_id: str) -> None:
    assert put(sam, profile_id, "a/b/c/d/e.md", "five segments").status_code == 200
    assert put(sam, profile_id, "y" * 256, "256 characters").status_code == 200
    assert put(sam, profile_id, "max.md", "x" * (64 * KIB)).json()["size"] == 64 * KIB
    message = error(put(sam, profile_id, "over.md", "x" * (64 * KIB + 1)), 413, "request_too_large")
    assert "65537 bytes; at most 65536" in message
    error(put(sam, profile_id, "a/b/c/d", "above an entry"), 409, "memory_path_conflict_error")


def test_the_101st_entry(sam: httpx.Client, profile_id: str) -> None:
    for i in range(100):
        assert put(sam, profile_id, f"n/{i:03}.md", f"entry {i}").status_code == 200
    message = error(put(sam, profile_id, "n/100.md", "one too many"), 400, "invalid_request_error")
    assert "at most 100" in message
    assert len(sam.get(f"/v1/profiles/{profile_id}/memories").json()["memories"]) == 100
    assert put(sam, profile_id, "n/000.md", "an update still fits").json()["changed"] is True


def test_five_mib_together(sam: httpx.Client, profile_id: str) -> None:
    for i in range(80):  # 80 x 64 KiB = 5 MiB
        assert put(sam, profile_id, f"big/{i:02}.md", "z" * (64 * KIB)).status_code == 200
    message = error(put(sam, profile_id, "tiny.md", "x"), 400, "invalid_request_error")
    assert f"at most {5 * MIB} bytes" in message
    listing = sam.get(f"/v1/profiles/{profile_id}/memories").json()["memories"]
    assert sum(m["size"] for m in listing) == 5 * MIB


def test_preconditions_over_http(sam: httpx.Client, profile_id: str) -> None:
    made = put(sam, profile_id, "p.md", "one", **{"If-None-Match": "*"})
    assert made.status_code == 200 and made.headers["etag"] == f'"{made.json()["content_hash"]}"'
    error(put(sam, profile_id, "p.md", "two", **{"If-None-Match": "*"}), 409, "memory_precondition_failed_error")
    error(
        put(sam, profile_id, "p.md", "two", **{"If-Match": '"' + "0" * 64 + '"'}),
        409,
        "memory_precondition_failed_error",
    )
    assert put(sam, profile_id, "p.md", "two", **{"If-Match": made.headers["etag"]}).json()["changed"]
    error(
        sam.delete(
            f"/v1/profiles/{profile_id}/memories/content",
            params={"path": "p.md"},
            headers={"If-Match": made.headers["etag"]},
        ),
        409,
        "memory_precondition_failed_error",
    )
    error(put(sam, profile_id, "p.md", "x", **{"If-Match": "nonsense"}), 400, "invalid_request_error")


def test_prompt_endpoint(sam: httpx.Client, profile_id: str) -> None:
    empty = sam.get(f"/v1/profiles/{profile_id}/prompt")
    assert empty.status_code == 200 and empty.headers["content-type"].startswith("text/markdown")
    assert empty.text.startswith("## Profile Memory Bank") and "create the first entry" in empty.text
    put(sam, profile_id, "preferences.md", "x")
    full = sam.get(f"/v1/profiles/{profile_id}/prompt").text
    assert "- `.memory/preferences.md`" in full and "create the first entry" not in full


@pytest.mark.slow
def test_cli_prompt_over_http(env: Env, url: str, sam: httpx.Client, profile_id: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gitmem.cli import main as cli

    put(sam, profile_id, "projects/acme.md", "x")
    home = ["--home", str(tmp_path / "unused-home")]
    result = CliRunner().invoke(cli, [*home, "prompt", "--profile", profile_id, "--url", url, "--token", env.sam])
    assert result.exit_code == 0, result.output
    assert result.output == sam.get(f"/v1/profiles/{profile_id}/prompt").text
    denied = CliRunner().invoke(cli, [*home, "prompt", "--profile", profile_id, "--url", url, "--token", env.alex])
    assert denied.exit_code == 1 and "not found" in denied.output


# -- a mounted bank ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bank_remote_protocol(env: Env, url: str, profile_id: str) -> None:
    from gitmem.sync.bank_remote import BankRemote
    from gitmem.sync.remote import RemoteNotFound, RemotePathConflict, RemotePreconditionFailed, RemoteRefused

    remote = BankRemote(url, env.sam, profile_id)
    try:
        with pytest.raises(ValueError, match=r"starts with '\.'"):
            remote.validate_path("/.x.swp")
        remote.validate_path("/projects/acme.md")
        made = remote.create("/projects/acme.md", "v1")
        assert made.memory_id == made.path == "/projects/acme.md"
        with pytest.raises(RemotePathConflict):
            remote.create("/projects/acme.md", "again")
        listing = remote.list_all(with_content=True)
        assert list(listing) == ["/projects/acme.md"] and listing["/projects/acme.md"].sha256 == made.sha256
        assert remote.read("/projects/acme.md").content == "v1"
        updated = remote.update("/projects/acme.md", content="v2", expected_sha256=made.sha256)
        with pytest.raises(RemotePreconditionFailed):
            remote.update("/projects/acme.md", content="v3", expected_sha256=made.sha256)
        moved = remote.update("/projects/acme.md", path="/projects/acme-corp.md", expected_sha256=updated.sha256)
        assert moved.memory_id == "/projects/acme-corp.md" and moved.content == "v2"
        assert list(remote.list_all()) == ["/projects/acme-corp.md"]
        with pytest.raises(RemoteNotFound):
            remote.read("/projects/acme.md")
        with pytest.raises(RemoteRefused):
            remote.create("/too-big.md", "x" * (64 * KIB + 1))
        with pytest.raises(RemotePreconditionFailed):
            remote.delete("/projects/acme-corp.md", expected_sha256=made.sha256)
        remote.delete("/projects/acme-corp.md", expected_sha256=moved.sha256)
        assert remote.list_all() == {}
        assert remote.prompt().startswith("## Profile Memory Bank")
    finally:
        remote.close()


@pytest.mark.slow
def test_a_mounted_bank_syncs_both_ways(env: Env, url: str, sam: httpx.Client, profile_id: str, tmp_path: Path) -> None:
    from gitmem.sync.bank_remote import bank_mount

    put(sam, profile_id, "preferences.md", "staging first")
    put(sam, profile_id, "projects/acme.md", "## Acme")
    folder = tmp_path / "workspace" / ".memory"
    (folder / "scratch").mkdir(parents=True)
    (folder / "scratch" / "junk.txt").write_text("transient")
    (folder / ".notes.md.swp").write_text("editor temp")
    base = f"/v1/profiles/{profile_id}/memories"

    def remote_text(path: str) -> str | None:
        response = sam.get(f"{base}/content", params={"path": path})
        return response.json()["content"] if response.status_code == 200 else None

    with no_sockets_left(), bank_mount(url, env.sam, profile_id, folder, debounce=0.05, poll_interval=0.1) as mount:
        # A clean start: exactly the entries.
        files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        assert files == ["preferences.md", "projects/acme.md"]
        assert (folder / "projects" / "acme.md").read_text() == "## Acme"
        # Local edits, creations, deletions go back to the bank.
        (folder / "projects" / "acme.md").write_text("## Acme\n- SOC2")
        (folder / "projects" / "globex.md").write_text("## Globex")
        (folder / "preferences.md").unlink()
        (folder / ".globex.md.swp").write_text("never synced")
        wait_for(lambda: remote_text("projects/acme.md") == "## Acme\n- SOC2")
        wait_for(lambda: remote_text("projects/globex.md") == "## Globex")
        wait_for(lambda: remote_text("preferences.md") is None)
        # Changes made through the API arrive in the folder.
        put(sam, profile_id, "from-api.md", "written while mounted")
        wait_for(lambda: (folder / "from-api.md").exists())
        assert (folder / "from-api.md").read_text() == "written while mounted"
        # A refused name stays local and is not retried forever.
        (folder / "bad name.md").write_text("refused")
        # Pending at stop time: flushed by stop() at the end of the block (which closes the bank's client).
        (folder / "last.md").write_text("written just before the end")
    assert remote_text("last.md") == "written just before the end"
    paths = [m["path"] for m in sam.get(base).json()["memories"]]
    assert paths == ["from-api.md", "last.md", "projects/acme.md", "projects/globex.md"]
    assert (folder / "bad name.md").exists()
    assert mount.status.rejected >= 1


# -- the agent session hooks -------------------------------------------------------------------------------


@pytest.mark.slow
def test_session_hooks_mount_print_and_flush(
    env: Env, url: str, sam: httpx.Client, profile_id: str, tmp_path: Path
) -> None:
    put(sam, profile_id, "preferences.md", "staging first")
    workspace = tmp_path / "ws"
    (workspace / ".memory").mkdir(parents=True)
    (workspace / ".memory" / "stale.tmp").write_text("from an earlier session")
    hook_env = {
        **os.environ,
        "GITMEM_URL": url,
        "GITMEM_TOKEN": env.sam,
        "GITMEM_PROFILE": profile_id,
        "WORKSPACE": str(workspace),
        "GITMEM_STATE_DIR": str(tmp_path / "state"),
    }
    start = subprocess.run(
        [str(HOOKS / "session-start")],
        env=hook_env,
        input='{"session_id": "s1"}',
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert start.returncode == 0, start.stderr
    assert start.stdout.startswith("## Profile Memory Bank")
    assert "- `.memory/preferences.md`" in start.stdout
    assert sorted(p.name for p in (workspace / ".memory").iterdir()) == ["preferences.md"]
    pid_files = list((tmp_path / "state").rglob("mount.pid"))
    assert len(pid_files) == 1
    pid = int(pid_files[0].read_text())
    os.kill(pid, 0)  # the mount runs in the background
    try:
        (workspace / ".memory" / "preferences.md").write_text("staging first, then prod")
        (workspace / ".memory" / "learned.md").write_text("the CI runner is flaky on Mondays")
        end = subprocess.run(
            [str(HOOKS / "session-end")], env=hook_env, input="{}", capture_output=True, text=True, timeout=150
        )
        assert end.returncode == 0, end.stderr
    finally:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)  # already gone: session-end stopped it
    assert not pid_files[0].exists()
    base = f"/v1/profiles/{profile_id}/memories/content"
    assert sam.get(base, params={"path": "preferences.md"}).json()["content"] == "staging first, then prod"
    assert sam.get(base, params={"path": "learned.md"}).json()["content"] == "the CI runner is flaky on Mondays"
    # The next session starts from the bank again.
    again = subprocess.run([str(HOOKS / "session-start")], env=hook_env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "- `.memory/learned.md`" in again.stdout
    subprocess.run([str(HOOKS / "session-end")], env=hook_env, capture_output=True, text=True, timeout=150)


@pytest.mark.slow
def test_session_end_without_a_mount_pushes_the_folder_once(
    env: Env, url: str, sam: httpx.Client, profile_id: str, tmp_path: Path
) -> None:
    from gitmem.sync.bank_session import BankSession, session_end

    workspace = tmp_path / "ws"
    (workspace / ".memory").mkdir(parents=True)
    (workspace / ".memory" / "orphan.md").write_text("written after the mount died")
    with no_sockets_left():  # the one-off mount's client is closed when it stops
        code = session_end(BankSession(url, env.sam, profile_id, tmp_path / "state"), workspace=str(workspace))
    assert code == 0
    read = sam.get(f"/v1/profiles/{profile_id}/memories/content", params={"path": "orphan.md"})
    assert read.json()["content"] == "written after the mount died"


def test_hooks_without_a_profile_do_nothing(tmp_path: Path) -> None:
    hook_env = {k: v for k, v in os.environ.items() if not k.startswith("GITMEM_")}
    hook_env.update({"WORKSPACE": str(tmp_path), "GITMEM_STATE_DIR": str(tmp_path / "state")})
    for hook in ("session-start", "session-end"):
        result = subprocess.run([str(HOOKS / hook)], env=hook_env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stdout == "", result.stderr
    assert not (tmp_path / ".memory").exists()


@pytest.mark.slow
def test_cli_bank_mount(env: Env, url: str, sam: httpx.Client, profile_id: str, tmp_path: Path) -> None:
    import sys

    put(sam, profile_id, "preferences.md", "staging first")
    folder, pid_file = tmp_path / ".memory", tmp_path / "mount.pid"
    cli_env = {**os.environ, "GITMEM_TOKEN": env.sam, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from gitmem.cli import main; main()",
            "bank-mount",
            "--profile",
            profile_id,
            "--url",
            url,
            "--pid-file",
            str(pid_file),
            str(folder),
        ],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(pid_file.exists, timeout=30)
        assert (folder / "preferences.md").read_text() == "staging first"
        (folder / "preferences.md").write_text("staging first, via the CLI mount")
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "unmounted" in err and not pid_file.exists()
    read = sam.get(f"/v1/profiles/{profile_id}/memories/content", params={"path": "preferences.md"})
    assert read.json()["content"] == "staging first, via the CLI mount"


@pytest.mark.slow
def test_cli_mount_profile_once_materialises_a_clean_bank(
    env: Env, url: str, sam: httpx.Client, profile_id: str, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from gitmem.cli import main as cli

    put(sam, profile_id, "projects/acme.md", "single-tenant")
    folder = tmp_path / ".memory"
    folder.mkdir()
    (folder / "scratch.txt").write_text("left over from the last session")
    with no_sockets_left():
        result = CliRunner().invoke(
            cli, ["mount", "--profile", profile_id, "--url", url, "--key", env.sam, "--once", str(folder)]
        )
    assert result.exit_code == 0, result.output
    assert (folder / "projects" / "acme.md").read_text() == "single-tenant"
    assert not (folder / "scratch.txt").exists()
    both = CliRunner().invoke(
        cli, ["mount", "--profile", profile_id, "--task", "task_x", "--url", url, "--key", env.sam, str(folder)]
    )
    assert both.exit_code == 2
