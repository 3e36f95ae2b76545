"""The CLI's basic commands against a real data home: output, exit status (0, 1 refused, 2 usage)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import pytest
from click.testing import CliRunner, Result

from gitmem.cli import main
from gitmem.engine.gitmem import Gitmem


class Run(Protocol):
    def __call__(self, *args: str, input: str | None = None) -> Result: ...


@pytest.fixture
def run(tmp_path: Path) -> Run:
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(main, ["--home", str(tmp_path), *args], input=input, catch_exceptions=False)

    return invoke


def store_id(run: Run) -> str:
    result = run("store", "create", "team-notes", "-d", "What we learned", "--meta", "team=infra")
    assert result.exit_code == 0
    return result.output.strip()


def test_store_lifecycle(run: Run, tmp_path: Path) -> None:
    sid = store_id(run)
    listed = json.loads(run("store", "list", "--json").output)
    assert [(s["id"], s["name"], s["metadata"]) for s in listed] == [(sid, "team-notes", {"team": "infra"})]
    shown = json.loads(run("store", "show", sid).output)
    assert Path(shown["repository"]) == tmp_path / "stores" / f"{sid}.git"
    assert "archived" in run("store", "archive", sid).output
    refused = run("note", "put", sid, "/a.md", input="x")
    assert refused.exit_code == 1 and "archived" in refused.output
    assert json.loads(run("store", "list", "--json").output) == []
    assert len(json.loads(run("store", "list", "--all", "--json").output)) == 1
    assert run("store", "delete", sid, "--yes").exit_code == 0
    assert not (tmp_path / "stores" / f"{sid}.git").exists()
    assert run("store", "show", sid).exit_code == 1


def test_notes_versions_and_redaction(run: Run) -> None:
    sid = store_id(run)
    assert run("note", "put", sid, "/people/sam.md", input="v1").output.startswith("created /people/sam.md")
    assert run("note", "put", sid, "/people/sam.md", input="v2").output.startswith("updated /people/sam.md")
    assert run("note", "get", sid, "/people/sam.md").output == "v2"
    assert "/people/" in run("note", "ls", sid, "/", "--depth", "1").output
    stale = run("note", "put", sid, "/people/sam.md", "--if-sha256", "0" * 64, input="v3")
    assert stale.exit_code == 1 and "content_sha256" in stale.output
    versions = json.loads(run("versions", sid, "--json").output)
    assert [v["operation"] for v in versions] == ["modified", "created"]
    assert run("redact", sid, versions[0]["id"]).exit_code == 1  # the newest of a live note
    assert run("redact", sid, versions[1]["id"]).output.startswith(f"redacted {versions[1]['id']}")
    assert "(redacted)" in run("versions", sid).output
    assert run("note", "rm", sid, "/people/sam.md").output.startswith("deleted /people/sam.md")
    assert run("note", "get", sid, "/people/sam.md").exit_code == 1


def test_refusals_exit_1_with_the_reason_and_usage_errors_exit_2(run: Run) -> None:
    sid = store_id(run)
    secret = run("note", "put", sid, "/creds.md", input="password: hunter2hunter2")
    assert secret.exit_code == 1 and "saved password" in secret.output
    bad_path = run("note", "put", sid, "no-slash.md", input="x")
    assert bad_path.exit_code == 1 and "must start with '/'" in bad_path.output
    assert run("note", "put").exit_code == 2
    assert run("retention", "zero").exit_code == 2


def test_reindex_and_fsck(run: Run, tmp_path: Path) -> None:
    sid = store_id(run)
    for i in range(5):
        run("note", "put", sid, f"/n{i}.md", input=f"note {i}")
    (tmp_path / "stores" / f"{sid}.git" / "gitmem" / "index.sqlite3").unlink()
    assert f"{sid}: 5 notes" in run("reindex", sid).output
    assert run("fsck").output.strip() == f"{sid}: ok"


def test_fsck_finds_an_index_that_drifted_from_history(run: Run, tmp_path: Path) -> None:
    sid = store_id(run)
    run("note", "put", sid, "/a.md", input="a")
    gm = Gitmem.open(tmp_path)
    store = gm.store(gm.catalog.list_workspaces()[0].id, sid)
    store.index.db.execute("UPDATE notes SET path='/forged.md'")
    result = run("fsck", sid)
    assert result.exit_code == 1 and "/forged.md" in result.output


def test_keys_users_and_retention(run: Run, tmp_path: Path) -> None:
    secret = run("keys", "create", "--name", "ci", "--role", "read-only").output.strip()
    assert secret.startswith("gm_key_") and "\n" not in secret
    gm = Gitmem.open(tmp_path)
    principal = gm.catalog.authenticate(secret)
    assert principal.role == "read-only"
    assert principal.credential_id in run("keys", "list").output
    assert run("keys", "revoke", principal.credential_id).exit_code == 0
    assert "revoked" in run("keys", "list").output
    token = run("users", "create", "--name", "ana").output.strip()
    assert gm.catalog.authenticate(token).actor.type == "user_actor"
    assert run("keys", "create", "--name", "x", "--workspace", "other").exit_code == 0
    assert gm.catalog.workspace_by_name("other") is not None
    assert run("retention", "-w", "other").output.strip() == "30 days"
    assert run("retention", "keep-all", "-w", "other").output.strip() == "keep-all"
    assert run("retention", "7", "-w", "other").output.strip() == "7 days"


def test_several_workspaces_need_a_name(run: Run) -> None:
    run("keys", "create", "--name", "a", "--workspace", "alpha")
    run("keys", "create", "--name", "b", "--workspace", "beta")
    ambiguous = run("store", "list")
    assert ambiguous.exit_code == 2 and "alpha, beta" in ambiguous.output
    assert run("store", "list", "-w", "beta").exit_code == 0


def test_a_cli_redaction_names_its_actor(run: Run, tmp_path: Path) -> None:
    from anthropic.types.beta.memory_stores import BetaManagedAgentsMemoryVersion
    from fastapi.testclient import TestClient

    from gitmem.api.app import Settings, create_app

    sid = store_id(run)
    for content in ("v1", "v2", "v3"):
        run("note", "put", sid, "/people/sam.md", input=content)
    gm = Gitmem.open(tmp_path)
    ws_id = gm.catalog.store(sid).workspace_id
    user, _ = gm.catalog.create_user(ws_id, "sam")
    _, key = gm.catalog.create_api_key(ws_id, "reader")
    oldest, middle = [v["id"] for v in json.loads(run("versions", sid, "--json").output)][:0:-1]
    assert run("redact", sid, oldest).exit_code == 0
    assert run("redact", sid, middle, "--as", user.id).exit_code == 0
    assert run("redact", sid, middle, "--as", "user_01NOSUCHUSER0000000000000").exit_code == 1

    with TestClient(create_app(gm, Settings.defaults(dream_runner=False)), headers={"x-api-key": key}) as api:
        for version_id, expected in (
            (oldest, {"type": "service_account_actor", "service_account_id": "svac_gitmem"}),
            (middle, {"type": "user_actor", "user_id": user.id}),
        ):
            body = api.get(f"/v1/memory_stores/{sid}/memory_versions/{version_id}").json()
            assert body["redacted_by"] == expected and body["redacted_at"]
            assert BetaManagedAgentsMemoryVersion.model_validate(body).redacted_by is not None


def test_a_read_with_an_unknown_workspace_is_refused_and_creates_nothing(run: Run, tmp_path: Path) -> None:
    sid = store_id(run)
    run("note", "put", sid, "/a.md", input="a")
    for read in (
        ["store", "list", "-w", "deafult"],
        ["note", "get", sid, "/a.md", "-w", "deafult"],
        ["versions", sid, "--workspace", "deafult"],
        ["keys", "list", "-w", "deafult"],
        ["note", "put", sid, "/b.md", "-w", "deafult"],
    ):
        refused = run(*read, input="b")
        assert refused.exit_code == 1, read
        assert "workspace 'deafult' not found (workspaces here: default)" in refused.output
    assert [ws.name for ws in Gitmem.open(tmp_path).catalog.list_workspaces()] == ["default"]
    assert run("store", "create", "x", "-w", "second").exit_code == 0  # a command that creates may
    assert run("store", "list", "-w", "second").exit_code == 0


def test_a_read_on_a_fresh_home_creates_no_workspace(run: Run, tmp_path: Path) -> None:
    refused = run("store", "list")
    assert refused.exit_code == 1 and "workspace 'default' not found (workspaces here: none yet)" in refused.output
    assert Gitmem.open(tmp_path).catalog.list_workspaces() == []


def test_note_put_with_a_precondition_on_a_missing_note_is_refused(run: Run) -> None:
    sid = store_id(run)
    refused = run("note", "put", sid, "/new.md", "--if-sha256", "0" * 64, input="x")
    assert refused.exit_code == 1 and "no memory at /new.md" in refused.output
    assert run("note", "get", sid, "/new.md").exit_code == 1


def test_the_service_has_one_name_in_versions_and_log(run: Run) -> None:
    sid = store_id(run)
    run("note", "put", sid, "/a.md", input="one")
    run("note", "put", sid, "/a.md", input="two")
    versions_rows = run("versions", sid).output.splitlines()[2:]
    log_rows = run("log", sid).output.splitlines()
    assert len(versions_rows) == len(log_rows) == 2
    for line in versions_rows + log_rows:
        assert line.split()[1] == "service", line
    assert len(run("log", sid, "--actor", "service").output.splitlines()) == 2


def test_one_table_printer_aligns_columns_with_or_without_headers(capsys: pytest.CaptureFixture[str]) -> None:
    from gitmem.cli.base import table

    table([["a", "long-cell", "x"], ["bbb", "c", "y"]], ["H", "TWO", "LAST"])
    assert capsys.readouterr().out.splitlines() == [
        "H    TWO        LAST",
        "---  ---------  ----",
        "a    long-cell  x",
        "bbb  c          y",
    ]
    table([["a", "long-cell", "x"], ["bbb", "c", "y"]])
    assert capsys.readouterr().out.splitlines() == ["a    long-cell  x", "bbb  c          y"]
    table([], ["ID", "NAME"])
    assert capsys.readouterr().out.splitlines() == ["ID  NAME", "--  ----"]
    table([])
    assert capsys.readouterr().out == ""


def test_every_command_is_listed_by_its_modules() -> None:
    # Each module, imported in turn in a fresh process: the commands it adds (or adds subcommands to)
    # must be listed for it, or a lazily loaded command would miss them.
    import subprocess
    import sys

    probe = """
import importlib, json
from gitmem.cli import COMMAND_MODULES, main
def tree():
    return {n: sorted(getattr(c, "commands", {})) for n, c in main.commands.items()}
added = {}
for module in COMMAND_MODULES:
    before = tree()
    importlib.import_module(module)
    added[module] = sorted(n for n, subs in tree().items() if before.get(n) != subs)
print(json.dumps(added))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    from gitmem.cli import COMMAND_MODULES

    assert json.loads(out) == {module: sorted(names) for module, names in COMMAND_MODULES.items()}


def test_a_hidden_command_imports_only_its_own_module() -> None:
    # Git starts hooks and filters per push and per file: they must not import every command's module.
    import subprocess
    import sys

    probe = (
        "import sys; from gitmem.cli import main; main.get_command(None, 'git-filter'); "
        "print(sorted(m for m in sys.modules if m.startswith('gitmem.cli.')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['gitmem.cli.base', 'gitmem.cli.node', 'gitmem.cli.node.internal']"


def test_hidden_commands_stay_out_of_the_help(run: Run) -> None:
    shown = run("--help").output
    assert "serve" in shown
    assert not {"hook", "git-filter"} & set(shown.split())
    assert run("hook", "--help").exit_code == 0


def test_git_filter_usage_errors_exit_2(run: Run) -> None:
    assert run("git-filter", "smudge").exit_code == 2  # smudge needs the note's path
    assert run("git-filter", "process", "a.md").exit_code == 2
    assert run("git-filter", "launder", "a.md").exit_code == 2
