"""Git access through the real app: the stock `git` client against a real uvicorn server.

Clone and fetch with the API's keys (never in the URL), push as a user and see the version through the
SDK, refusals printed by Git, read-only and API keys that may clone but not push, other workspaces'
stores and unreachable objects never served.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anthropic
import httpx
import pytest
from anthropic.types.beta.memory_stores import BetaManagedAgentsUserActor
from click.testing import CliRunner

from gitmem.agents.tasks.tasks import tasks_for
from gitmem.cli import main
from gitmem.engine.gitmem import Gitmem
from tests.apps import make_test_home
from tests.checks import memory
from tests.server import REAL_SERVER_ENV, RealServer, serve

# The real git client against a real uvicorn: the network is the point.
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Site:
    base_url: str
    home: Path
    admin: str
    reader: str
    user_id: str
    user: str
    stranger: str
    # Every client handed out, closed with the site (not left for the collector: see tests/checks.py).
    clients: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, compare=False, repr=False)

    def url(self, store_id: str) -> str:
        return f"{self.base_url}/v1/memory_stores/{store_id}.git"

    def sdk(self, secret: str | None = None) -> anthropic.Anthropic:
        client = anthropic.Anthropic(api_key=secret or self.admin, base_url=self.base_url, max_retries=0)
        return self.clients.enter_context(client)


@pytest.fixture(scope="module")
def site(real_server: RealServer) -> Iterator[Site]:
    home = make_test_home(real_server.home, workspace="git-access", other_workspace="git-access-other", fsync="never")
    site = Site(real_server.base_url, home.path, home.admin, home.reader, home.user_id, home.user, home.other)
    yield site
    site.clients.close()


def git(
    *args: str,
    cwd: Path | None = None,
    secret: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run git with the secret as an Authorization header from the environment, never in a URL."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd or Path.cwd())}
    config: list[str] = ["-c", "credential.helper="]
    if secret:
        env.update(
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0="http.extraHeader",
            GIT_CONFIG_VALUE_0=f"Authorization: Bearer {secret}",
        )
    result = subprocess.run(["git", *config, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed:\n{result.stderr}")
    return result


def new_store(site: Site, notes: dict[str, str]) -> str:
    client = site.sdk()
    store_id = client.beta.memory_stores.create(name="team").id
    for path, content in notes.items():
        client.beta.memory_stores.memories.create(store_id, path=path, content=content)
    return store_id


def clone(site: Site, store_id: str, into: Path, secret: str) -> Path:
    git("clone", "-q", site.url(store_id), str(into), secret=secret, cwd=into.parent)
    # Pushed commits must name the pusher (the pre-receive hook refuses anyone else).
    git("config", "user.name", Gitmem.open(site.home).catalog.credential(site.user_id).name, cwd=into)
    git("config", "user.email", f"{site.user_id}@user.gitmem", cwd=into)
    return into


def test_clone_reads_history_as_an_audit(site: Site, tmp_path: Path) -> None:
    store_id = new_store(site, {"/people/sam.md": "Sam likes staging.", "/a.md": "a"})
    work = clone(site, store_id, tmp_path / "clone", site.reader)  # read access is enough
    assert (work / "people" / "sam.md").read_text() == "Sam likes staging."
    log = git("log", "--format=%an %s", cwd=work).stdout.splitlines()
    assert len(log) == 2 and all(line.startswith("apikey_") for line in log)
    assert log[0].endswith("created /a.md")
    assert "Memory-Version: memver_" in git("log", "-1", cwd=work).stdout
    assert site.admin not in (work / ".git" / "config").read_text()


def test_pushed_edit_is_a_version_by_the_user(site: Site, tmp_path: Path) -> None:
    store_id = new_store(site, {"/people/sam.md": "old"})
    work = clone(site, store_id, tmp_path / "clone", site.user)
    (work / "people" / "sam.md").write_text("new from my editor")
    (work / "people" / "ana.md").write_text("Ana joined")
    git("commit", "-qam", "edit", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-qm", "add ana", cwd=work)
    git("push", "-q", "origin", "main", cwd=work, secret=site.user)

    client = site.sdk()
    versions = list(client.beta.memory_stores.memory_versions.list(store_id))
    assert [(v.operation, v.path) for v in versions[:2]] == [
        ("created", "/people/ana.md"),
        ("modified", "/people/sam.md"),
    ]
    assert all(
        isinstance(v.created_by, BetaManagedAgentsUserActor) and v.created_by.user_id == site.user_id
        for v in versions[:2]
    )
    notes = {m.path: memory(m) for m in client.beta.memory_stores.memories.list(store_id, view="full")}
    assert notes["/people/sam.md"].content == "new from my editor"
    assert (
        git("rev-parse", "HEAD", cwd=work).stdout
        == git("ls-remote", site.url(store_id), "refs/heads/main", cwd=work, secret=site.user).stdout.split()[0] + "\n"
    )


@pytest.mark.parametrize(
    ("path", "content", "reason"),
    [
        ("secrets.md", "password: hunter2hunter2", "saved password"),
        ("big.md", "x" * 102_401, "bytes"),
        (".gitattributes", "* text", "reserves"),
    ],
)
def test_a_refused_push_prints_why_and_changes_nothing(
    site: Site, tmp_path: Path, path: str, content: str, reason: str
) -> None:
    store_id = new_store(site, {"/keep.md": "keep"})
    before = list(site.sdk().beta.memory_stores.memory_versions.list(store_id))
    work = clone(site, store_id, tmp_path / "clone", site.user)
    (work / path).write_text(content)
    git("add", ".", cwd=work)
    git("commit", "-qm", "bad", cwd=work)
    pushed = git("push", "origin", "main", cwd=work, secret=site.user, check=False)
    assert pushed.returncode != 0
    assert "gitmem: refused" in pushed.stderr and reason in pushed.stderr
    assert list(site.sdk().beta.memory_stores.memory_versions.list(store_id)) == before


def test_only_users_with_write_access_push(site: Site, tmp_path: Path) -> None:
    store_id = new_store(site, {"/a.md": "a"})
    work = clone(site, store_id, tmp_path / "clone", site.reader)
    (work / "a.md").write_text("changed")
    git("commit", "-qam", "edit", cwd=work)
    as_reader = git("push", "origin", "main", cwd=work, secret=site.reader, check=False)
    assert as_reader.returncode != 0 and "may only read" in as_reader.stderr
    as_key = git("push", "origin", "main", cwd=work, secret=site.admin, check=False)
    assert as_key.returncode != 0 and "user's token" in as_key.stderr
    assert memory(site.sdk().beta.memory_stores.memories.list(store_id, view="full").data[0]).content == "a"
    git("push", "-q", "origin", "main", cwd=work, secret=site.user)  # a user with write access may
    git("reset", "-q", "--hard", "HEAD~1", cwd=work)
    (work / "a.md").write_text("history rewritten")
    git("commit", "-qam", "rewrite", cwd=work)
    forced = git("push", "--force", "origin", "main", cwd=work, secret=site.user, check=False)
    assert forced.returncode != 0
    assert memory(site.sdk().beta.memory_stores.memories.list(store_id, view="full").data[0]).content == "changed"


def test_no_key_wrong_key_and_other_workspaces_cannot_clone(site: Site, tmp_path: Path) -> None:
    store_id = new_store(site, {"/a.md": "a"})
    for secret in (None, "gm_key_wrong", site.stranger):
        result = git("clone", "-q", site.url(store_id), str(tmp_path / "x"), secret=secret, cwd=tmp_path, check=False)
        assert result.returncode != 0
        assert not (tmp_path / "x").exists()
    assert (
        "not found"
        in git(
            "clone", "-q", site.url(store_id), str(tmp_path / "y"), secret=site.stranger, cwd=tmp_path, check=False
        ).stderr
    )


def test_a_task_clones_only_its_own_stores(site: Site, tmp_path: Path) -> None:
    mine, other = new_store(site, {"/a.md": "a"}), new_store(site, {"/b.md": "b"})
    gm = Gitmem.open(site.home)
    ws = gm.catalog.authenticate(site.admin).workspace_id
    worker = tasks_for(gm).create_worker(ws, "cloner")
    _, token = tasks_for(gm).create_task(
        ws, worker.id, [{"type": "memory_store", "memory_store_id": mine, "access": "read_only"}]
    )
    assert (clone(site, mine, tmp_path / "mine", token) / "a.md").exists()
    refused = git("clone", "-q", site.url(other), str(tmp_path / "other"), secret=token, cwd=tmp_path, check=False)
    assert refused.returncode != 0


def test_unreachable_objects_are_not_served(site: Site, tmp_path: Path) -> None:
    store_id = new_store(site, {"/a.md": "a"})
    repo = Gitmem.open(site.home).repo_path(store_id)
    secret_blob = subprocess.run(
        ["git", "-C", str(repo), "hash-object", "-w", "--stdin"],
        input="dropped secret",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    work = clone(site, store_id, tmp_path / "clone", site.reader)
    for version in ("2", "0"):
        fetched = git(
            "-c",
            f"protocol.version={version}",
            "fetch",
            "origin",
            secret_blob,
            cwd=work,
            secret=site.reader,
            check=False,
        )
        assert fetched.returncode != 0
    assert git("cat-file", "-e", secret_blob, cwd=work, check=False).returncode != 0


def test_a_redacted_version_cannot_be_fetched_by_id(site: Site, tmp_path: Path) -> None:
    client = site.sdk()
    store_id = new_store(site, {"/plan.md": "the secret plan"})
    note = memory(next(iter(client.beta.memory_stores.memories.list(store_id))))
    client.beta.memory_stores.memories.update(note.id, memory_store_id=store_id, content="the public plan")
    work = clone(site, store_id, tmp_path / "before", site.reader)  # a clone from before the rewrite
    repo = Gitmem.open(site.home).repo_path(store_id)
    old_blob = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "main~1:plan.md"], capture_output=True, text=True, check=True
    ).stdout.strip()
    first = list(client.beta.memory_stores.memory_versions.list(store_id, memory_id=note.id))[-1]
    client.beta.memory_stores.memory_versions.redact(first.id, memory_store_id=store_id)

    assert subprocess.run(["git", "-C", str(repo), "cat-file", "-e", old_blob]).returncode != 0
    fresh = clone(site, store_id, tmp_path / "after", site.reader)
    for version in ("2", "0"):
        fetched = git(
            "-c", f"protocol.version={version}", "fetch", "origin", old_blob, cwd=fresh, secret=site.reader, check=False
        )
        assert fetched.returncode != 0
    assert git("cat-file", "-e", old_blob, cwd=fresh, check=False).returncode != 0
    assert "the secret plan" not in git("log", "-p", cwd=fresh).stdout
    # The old clone sees a forced update, as the docs say.
    assert "forced update" in git("fetch", "origin", cwd=work, secret=site.reader).stderr


def test_a_store_config_cannot_switch_the_push_rules_off(site: Site, tmp_path: Path) -> None:
    store_id = new_store(site, {"/a.md": "a"})
    repo = Gitmem.open(site.home).repo_path(store_id)
    (tmp_path / "no-hooks").mkdir()
    subprocess.run(["git", "-C", str(repo), "config", "core.hooksPath", str(tmp_path / "no-hooks")], check=True)
    work = clone(site, store_id, tmp_path / "clone", site.user)
    (work / "creds.md").write_text("password: hunter2hunter2")
    git("add", ".", cwd=work)
    git("commit", "-qm", "sneak", cwd=work)
    pushed = git("push", "origin", "main", cwd=work, secret=site.user, check=False)
    assert pushed.returncode != 0 and "saved password" in pushed.stderr


def test_a_clone_fetches_the_review_records(site: Site, tmp_path: Path) -> None:
    """The review mark is history a clone can fetch (refs/reviews/main), and nobody can push it."""
    store_id = new_store(site, {"/a.md": "approved fact"})
    admin = site.sdk()
    admin.post(f"/v1/memory_stores/{store_id}", cast_to=object, body={"review": True})
    note = admin.beta.memory_stores.memories.create(store_id, path="/b.md", content="pending fact")
    steward = site.sdk(site.user)
    steward.post(
        f"/v1/memory_stores/{store_id}/review/approve",
        cast_to=object,
        body={"through_version_id": note.memory_version_id},
    )

    repo = clone(site, store_id, tmp_path / "c", site.reader)
    git("fetch", "-q", "origin", "refs/reviews/main:refs/reviews/main", cwd=repo, secret=site.reader)
    records = git("log", "--format=%an %s", "refs/reviews/main", cwd=repo).stdout.splitlines()
    assert records[0] == f"{site.user_id} review: approved through {note.memory_version_id}"
    first = admin.beta.memory_stores.memory_versions.list(store_id).data[-1].id
    assert records[1].endswith(f"review: enabled through {first}")
    audit = CliRunner().invoke(main, ["log", "--repo", str(repo)])
    assert audit.exit_code == 0
    assert any(
        "reviewed" in line and site.user_id in line and note.memory_version_id in line
        for line in audit.output.splitlines()
    )

    # Pushing a forged review record is refused: only main may be pushed.
    empty_tree = git("hash-object", "-t", "tree", "/dev/null", cwd=repo).stdout.strip()
    forged = git(
        "commit-tree", empty_tree, "-p", "refs/reviews/main", "-m", "review: approved through everything", cwd=repo
    ).stdout.strip()
    git("update-ref", "refs/reviews/main", forged, cwd=repo)
    pushed = git("push", "origin", "refs/reviews/main:refs/reviews/main", cwd=repo, secret=site.user, check=False)
    assert pushed.returncode != 0 and "only refs/heads/main may be pushed" in pushed.stderr


def test_git_is_authenticated_and_rate_limited_as_rest_is(tmp_path: Path) -> None:
    """Over a real server, Git's requests spend the key's one token bucket as REST's do, and once it is
    empty Git is refused with 429 like REST; a wrong key is 401 to both (Git: authentication failed)."""
    home = make_test_home(tmp_path / "home", fsync="never")
    env = {**REAL_SERVER_ENV, "GITMEM_RATE_LIMIT_RPS": "0.001", "GITMEM_RATE_LIMIT_BURST": "8"}  # no refill
    with serve(home.path, env=env) as base_url, httpx.Client(base_url=base_url) as http:
        admin = {"x-api-key": home.admin}
        store_id = http.post("/v1/memory_stores", json={"name": "limited"}, headers=admin).json()["id"]  # 1 of 8
        note = {"path": "/a.md", "content": "a"}
        assert http.post(f"/v1/memory_stores/{store_id}/memories", json=note, headers=admin).status_code == 200  # 2
        url = f"{base_url}/v1/memory_stores/{store_id}.git"
        assert "refs/heads/main" in git("ls-remote", url, secret=home.admin, cwd=tmp_path).stdout
        served = 0
        while (listed := http.get("/v1/memory_stores", headers=admin)).status_code == 200:
            served += 1
        assert listed.status_code == 429 and listed.json()["error"]["type"] == "rate_limit_error"
        assert served < 6  # what was left of 8 after the two writes: Git spent from the same bucket
        limited = git("ls-remote", url, secret=home.admin, cwd=tmp_path, check=False)
        assert limited.returncode != 0 and "429" in limited.stderr, limited.stderr
        assert "refs/heads/main" in git("ls-remote", url, secret=home.reader, cwd=tmp_path).stdout  # another key's

        # A wrong key as Git sends one it was given (the Basic-auth password): 401, Git gives up on it.
        wrong_url = url.replace("http://", "http://k:gm_key_wrong@")
        wrong = git("ls-remote", wrong_url, cwd=tmp_path, check=False)
        assert wrong.returncode != 0 and "Authentication failed" in wrong.stderr, wrong.stderr
        assert http.get("/v1/memory_stores", headers={"x-api-key": "gm_key_wrong"}).status_code == 401
