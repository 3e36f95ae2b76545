"""``gitmem log``: the audit of a store, from the server's index and from a plain clone."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gitmem.cli import main
from gitmem.engine.audit import log as audit
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import InvalidRequest
from gitmem.model import Actor
from tests.unit.engine.push.test_receive import API, Pusher

TASK = Actor("task_actor", "task_01TESTTESTTESTTESTTESTTEST")


class Story:
    """A store with API, task and pushed changes: what an auditor wants to read back."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.gm = Gitmem.open(self.home, fsync="never")
        ws = self.gm.catalog.create_workspace("acme")
        user, _ = self.gm.catalog.create_user(ws.id, "sam")
        self.user_id = user.id
        info = self.gm.create_store(ws.id, "team notes")
        self.store_id = info.id
        store = self.gm.store(ws.id, info.id)
        sam = store.create("/people/sam.md", "Sam likes tea.\n", actor=API)
        acme = store.create("/projects/acme.md", "Acme launches in May.\n", actor=API)
        store.update(acme.id, "Acme launches in June.\n", actor=TASK)
        self.sam_id = sam.id
        time.sleep(0.01)
        self.before_pushes = dt.datetime.now(dt.UTC)
        self.pusher = Pusher(self.gm, ws.id, info.id, user.id, root)
        self.pusher.write("people/sam.md", "Sam likes green tea.\n")
        self.pusher.write("people/ana.md", "Ana writes Rust.\n")
        self.pusher.commit("sam and ana")
        self.pusher.move("people/ana.md", "team/ana.md")
        self.pusher.commit("ana joins the team")
        assert self.pusher.push().returncode == 0
        self.pusher.git("rm", "-q", "projects/acme.md")
        self.pusher.commit("acme is done")
        assert self.pusher.push().returncode == 0
        self.store = store
        self.clone = self.pusher.dir
        self.pusher.git("fetch", "-q", "origin", "refs/notes/gitmem:refs/notes/gitmem")

    def cli(self, *args: str) -> Result:
        return CliRunner().invoke(main, ["--home", str(self.home), "log", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    return Story(tmp_path_factory.mktemp("audit"))


def _key(entry: dict[str, Any]) -> tuple[str, ...]:
    return (
        entry["version_id"],
        entry["memory_id"],
        entry["operation"],
        entry["path"],
        entry["created_at"],
        json.dumps(entry["created_by"], sort_keys=True),
    )


def test_the_server_log_lists_every_version_newest_first(story: Story) -> None:
    result = story.cli(story.store_id)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    versions = story.store.versions(limit=100).items
    assert len(lines) == len(versions) == 7
    for line, version in zip(lines, versions, strict=True):
        assert line.endswith(version.id)
        assert version.operation in line.split()
    # aligned columns: the version id starts at the same place on every line
    assert len({line.index("memver_") for line in lines}) == 1
    newest = lines[0].split()
    assert newest[1:] == [story.user_id, "deleted", "/projects/acme.md", versions[0].id]
    assert any(
        line.split()[1:6] == [story.user_id, "modified", "/people/ana.md", "->", "/team/ana.md"] for line in lines
    )
    assert lines[-1].split()[1:3] == [API.id, "created"]
    assert any(TASK.id in line and "/projects/acme.md" in line for line in lines)
    # the time column: UTC with microseconds, the version's created_at
    assert lines[-1].split()[0] == audit.time_text(versions[-1].created_at)


def test_the_server_log_as_json(story: Story) -> None:
    result = story.cli(story.store_id, "--json")
    assert result.exit_code == 0
    entries = json.loads(result.stdout)
    versions = story.store.versions(limit=100).items
    assert [e["version_id"] for e in entries] == [v.id for v in versions]
    move = next(e for e in entries if e["previous_path"])
    assert move["previous_path"] == "/people/ana.md" and move["path"] == "/team/ana.md"
    assert move["operation"] == "modified"
    assert move["created_by"] == {"type": "user_actor", "user_id": story.user_id}
    first = entries[-1]
    assert first["created_by"] == {"type": "api_actor", "api_key_id": API.id}
    assert first["created_at"].endswith("Z") and "." in first["created_at"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--actor", "USER"],
            {
                ("modified", "/people/sam.md"),
                ("created", "/people/ana.md"),
                ("modified", "/team/ana.md"),
                ("deleted", "/projects/acme.md"),
            },
        ),
        (["--actor", TASK.id], {("modified", "/projects/acme.md")}),
        (
            ["--operation", "created"],
            {("created", "/people/sam.md"), ("created", "/projects/acme.md"), ("created", "/people/ana.md")},
        ),
        (
            ["--path", "/projects/acme.md"],
            {("created", "/projects/acme.md"), ("modified", "/projects/acme.md"), ("deleted", "/projects/acme.md")},
        ),
        (
            ["--path", "/people"],
            {
                ("created", "/people/sam.md"),
                ("modified", "/people/sam.md"),
                ("created", "/people/ana.md"),
                ("modified", "/team/ana.md"),
            },
        ),
        (["--path", "/team/*"], {("modified", "/team/ana.md")}),
        (
            ["--until", "BEFORE"],
            {("created", "/people/sam.md"), ("created", "/projects/acme.md"), ("modified", "/projects/acme.md")},
        ),
        (["--since", "BEFORE", "--operation", "deleted"], {("deleted", "/projects/acme.md")}),
    ],
)
def test_filters(story: Story, args: list[str], expected: set[tuple[str, str]]) -> None:
    args = [{"USER": story.user_id, "BEFORE": story.before_pushes.isoformat()}.get(a, a) for a in args]
    for source in ([story.store_id], ["--repo", str(story.clone)]):
        result = story.cli(*source, "--json", *args)
        assert result.exit_code == 0, result.output
        assert {(e["operation"], e["path"]) for e in json.loads(result.stdout)} == expected, source


def test_count_and_order(story: Story) -> None:
    newest = json.loads(story.cli(story.store_id, "--json", "-n", "2").stdout)
    everything = json.loads(story.cli(story.store_id, "--json").stdout)
    assert newest == everything[:2]
    oldest_first = json.loads(story.cli(story.store_id, "--json", "--reverse").stdout)
    assert oldest_first == list(reversed(everything))


def test_a_plain_clone_gives_the_same_log(story: Story, tmp_path: Path) -> None:
    server = json.loads(story.cli(story.store_id, "--json").stdout)
    fresh = tmp_path / "fresh"
    story.pusher.git("clone", "-q", str(story.gm.repo_path(story.store_id)), str(fresh), cwd=tmp_path)

    # without the notes: every version is there, the pushed ones without their user
    result = story.cli("--repo", str(fresh), "--json")
    assert result.exit_code == 0
    bare = json.loads(result.stdout)
    assert [e["version_id"] for e in bare] == [e["version_id"] for e in server]
    unattributed = [e for e in bare if e.get("attributed") is False]
    assert len(unattributed) == 4 and all(e["git_author"] == f"sam <{story.user_id}@user.gitmem>" for e in unattributed)
    assert "git fetch origin refs/notes/gitmem:refs/notes/gitmem" in result.stderr
    human = story.cli("--repo", str(fresh)).stdout
    assert f"?{story.user_id}@user.gitmem" in human

    # with them: the very same audit as the server's
    story.pusher.git("fetch", "-q", "origin", "refs/notes/gitmem:refs/notes/gitmem", cwd=fresh)
    result = story.cli("--repo", str(fresh), "--json")
    assert result.stderr == ""
    assert [_key(e) for e in json.loads(result.stdout)] == [_key(e) for e in server]
    lines = story.cli("--repo", str(fresh)).stdout.splitlines()
    assert lines == story.cli(story.store_id).stdout.splitlines()

    # the store's own bare repository reads the same way
    result = story.cli("--repo", str(story.gm.repo_path(story.store_id)), "--json")
    assert [_key(e) for e in json.loads(result.stdout)] == [_key(e) for e in server]


def test_git_log_reads_as_an_audit(story: Story) -> None:
    log = story.pusher.git("log", "--format=%an|%s", "origin/main").stdout.splitlines()
    assert log[-3:] == [
        f"{TASK.id}|modified /projects/acme.md",
        f"{API.id}|created /projects/acme.md",
        f"{API.id}|created /people/sam.md",
    ]
    assert log[0] == "sam|acme is done"  # the pusher: no other author or committer is accepted
    story.pusher.git("fetch", "-q", "origin", "refs/notes/gitmem:refs/notes/gitmem")
    noted = story.pusher.git("log", "-1", "--notes=gitmem", "--format=%N", "origin/main").stdout
    assert json.loads(noted)["user_id"] == story.user_id


def test_usage_and_refusals(story: Story) -> None:
    assert story.cli().exit_code == 2
    assert story.cli(story.store_id, "--repo", str(story.clone)).exit_code == 2
    bad_actor = story.cli(story.store_id, "--actor", "bob")
    assert bad_actor.exit_code == 2 and "unknown actor" in bad_actor.output
    assert story.cli(story.store_id, "--since", "yesterday-ish").exit_code == 2
    missing = story.cli("memstore_01NOPENOPENOPENOPENOPENOPE")
    assert missing.exit_code == 1 and "not found" in missing.stderr
    other = story.cli(story.store_id, "--workspace", "elsewhere")
    assert other.exit_code == 1 and "not found" in other.stderr


def test_times_and_actors_parse() -> None:
    now = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    assert audit.parse_time("3d", now) == now - dt.timedelta(days=3)
    assert audit.parse_time("2 weeks ago", now) == now - dt.timedelta(weeks=2)
    assert audit.parse_time("2026-02-01") == dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    assert audit.parse_time("2026-02-01T10:00:00+02:00") == dt.datetime(2026, 2, 1, 8, tzinfo=dt.UTC)
    assert audit.parse_actor("user_01ABC") == Actor("user_actor", "user_01ABC")
    assert audit.parse_actor("apikey_01ABC") == Actor("api_actor", "apikey_01ABC")
    assert audit.parse_actor("task_actor task_id=task_01ABC") == Actor("task_actor", "task_01ABC")
    assert audit.parse_actor("service") is None
    with pytest.raises(InvalidRequest):
        audit.parse_actor("someone")
    with pytest.raises(InvalidRequest):
        audit.AuditFilter(operation="renamed")
