"""``gitmem export`` and its import: the round trip gives the same store, version for version."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import main
from gitmem.clock import FrozenClock
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.store.restore import restore
from gitmem.engine.store.store import MemoryStore
from gitmem.engine.transfer.archive import ArchiveSource, export_store
from gitmem.engine.transfer.replay import run_import
from gitmem.errors import InvalidRequest
from gitmem.model import Actor
from tests.unit.engine.transfer.snapshots import snapshot

ANA = Actor("user_actor", "user_01ANAANAANAANAANAANAANAANA")
KEY = Actor("api_actor", "apikey_01KEYKEYKEYKEYKEYKEYKEYKEY")
TASK = Actor("task_actor", "task_01TASKTASKTASKTASKTASKTAS")


def fill(store: MemoryStore, clock: FrozenClock) -> None:
    """Every kind of version: created, modified, moved, deleted, restored, redacted, by several actors."""
    sam = store.create("/people/sam.md", "Sam prefers staging first.", actor=ANA)
    clock.advance(minutes=5)
    acme = store.create("/projects/acme.md", "# Acme\n- single-tenant\n", actor=KEY)
    store.update(sam.id, content="Sam prefers staging; no Friday applies.", actor=TASK)
    clock.advance(hours=2)
    store.update(acme.id, path="/clients/acme.md", actor=ANA)
    gone = store.create("/scratch.md", "to be deleted")
    store.delete(gone.id, actor=KEY)
    restore(store, gone.id, gone.version_id, actor=ANA)
    leak = store.update(sam.id, content="Sam's desk is by the window.", actor=ANA)
    store.update(sam.id, content="Sam sits by the door now.", actor=TASK)
    redact(store, leak.version_id, ANA)
    store.create("/ünïcode/ñote.md", "multi\nline\n\n\ntext ✓", actor=TASK)


@pytest.fixture
def source(gm: Gitmem, clock: FrozenClock) -> MemoryStore:
    ws = gm.catalog.create_workspace("source")
    info = gm.create_store(ws.id, "team-notes", description="What the team learned", metadata={"team": "infra"})
    store = gm.store(ws.id, info.id)
    fill(store, clock)
    return store


def test_an_export_imports_back_version_for_version(gm: Gitmem, source: MemoryStore, tmp_path: Path) -> None:
    info = gm.catalog.store(source.id)
    report = export_store(source, info, tmp_path / "notes.tar.gz")
    assert (report.versions, report.notes) == (10, 4)
    ws = gm.catalog.create_workspace("target")
    imported = run_import(gm, ws.id, ArchiveSource(report.path))
    assert (imported.imported, imported.skipped, imported.resumed) == (10, 0, False)
    target = gm.store(ws.id, imported.store_id)
    assert target.id != source.id
    assert snapshot(target) == snapshot(source)
    assert any(v["redacted_at"] for v in snapshot(target)["versions"])  # the redacted version stayed so
    made = gm.catalog.store(target.id)
    assert (made.name, made.description, made.metadata) == ("team-notes", "What the team learned", {"team": "infra"})
    assert not (gm.home / "imports").exists() or not any((gm.home / "imports").iterdir())  # the journal is gone
    # Same records, same trees, same parents: the very same commits.
    assert target.repo.references["refs/heads/main"].target == source.repo.references["refs/heads/main"].target


def test_the_archive_reads_with_stock_git_and_tar(gm: Gitmem, source: MemoryStore, tmp_path: Path) -> None:
    path = export_store(source, gm.catalog.store(source.id), tmp_path / "notes.tar.gz").path
    with tarfile.open(path) as tar:
        assert sorted(tar.getnames()) == ["history.bundle", "manifest.json", "versions.jsonl"]
        tar.extractall(tmp_path / "out", filter="data")
    out = tmp_path / "out"
    subprocess.run(["git", "clone", "-q", str(out / "history.bundle"), str(tmp_path / "clone")], check=True)
    log = subprocess.run(
        ["git", "-C", str(tmp_path / "clone"), "log", "--format=%an|%s"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(log) == 10 and log[-1] == f"{ANA.id}|created /people/sam.md"
    assert (tmp_path / "clone" / "people" / "sam.md").read_text() == "Sam sits by the door now."
    lines = [json.loads(line) for line in (out / "versions.jsonl").read_text().splitlines()]
    assert [v["id"] for v in lines] == [v["id"] for v in snapshot(source)["versions"]]
    assert lines[0]["created_by"] == {"type": "user_actor", "user_id": ANA.id}
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["format"], manifest["versions"], manifest["store"]["name"]) == ("gitmem-export", 10, "team-notes")


def test_an_import_goes_only_into_an_empty_store(gm: Gitmem, source: MemoryStore, tmp_path: Path) -> None:
    path = export_store(source, gm.catalog.store(source.id), tmp_path / "notes.tar.gz").path
    ws = gm.catalog.create_workspace("target")
    busy = gm.create_store(ws.id, "busy")
    gm.store(ws.id, busy.id).create("/mine.md", "already here")
    with pytest.raises(InvalidRequest, match="is not empty"):
        run_import(gm, ws.id, ArchiveSource(path), into=busy.id)
    assert gm.store(ws.id, busy.id).versions().items[0].path == "/mine.md"


def test_a_truncated_or_foreign_archive_is_refused(gm: Gitmem, source: MemoryStore, tmp_path: Path) -> None:
    path = export_store(source, gm.catalog.store(source.id), tmp_path / "notes.tar.gz").path
    with tarfile.open(path) as tar:
        tar.extractall(tmp_path / "out", filter="data")
    lines = (tmp_path / "out" / "versions.jsonl").read_text().splitlines()
    (tmp_path / "out" / "versions.jsonl").write_text("\n".join(lines[:4]) + "\n")
    cut = tmp_path / "cut.tar.gz"
    with tarfile.open(cut, "w:gz") as tar:
        for name in ("manifest.json", "versions.jsonl"):
            tar.add(tmp_path / "out" / name, arcname=name)
    ws = gm.catalog.create_workspace("target")
    with pytest.raises(InvalidRequest, match="holds 4 versions; its manifest says 10"):
        run_import(gm, ws.id, ArchiveSource(cut))
    with pytest.raises(InvalidRequest, match=r"cannot write .*: No such file or directory"):
        export_store(source, gm.catalog.store(source.id), tmp_path / "no-such-folder" / "x.tar.gz")
    (tmp_path / "plain.txt").write_text("hello")
    with pytest.raises(InvalidRequest, match="is not a gitmem export"):
        ArchiveSource(tmp_path / "plain.txt")


def test_the_cli_exports_and_imports(gm: Gitmem, source: MemoryStore, tmp_path: Path) -> None:
    runner = CliRunner()
    home = ["--home", str(gm.home)]
    out = runner.invoke(main, [*home, "export", source.id, "-o", str(tmp_path / "x.tar.gz"), "-w", "source"])
    assert out.exit_code == 0, out.output
    assert "exported 10 versions of 4 notes" in out.output
    done = runner.invoke(main, [*home, "import", str(tmp_path / "x.tar.gz"), "-w", "copy", "--name", "copy"])
    assert done.exit_code == 0, done.output
    store_id = done.output.strip().split()[-1]
    assert done.output.strip().endswith(f"imported 10 versions into {store_id}")
    ws = gm.catalog.workspace_by_name("copy")
    assert ws is not None and gm.catalog.store(store_id).name == "copy"
    assert snapshot(gm.store(ws.id, store_id)) == snapshot(source)


def test_an_encrypted_store_exports_only_decrypted_and_imports_encrypted_again(
    gm: Gitmem, clock: FrozenClock, tmp_path: Path
) -> None:
    ws = gm.catalog.create_workspace("sealed")
    info = gm.create_store(ws.id, "sealed", encrypted=True)
    store = gm.store(ws.id, info.id)
    fill(store, clock)
    with pytest.raises(InvalidRequest, match="--decrypted"):
        export_store(store, info, tmp_path / "sealed.tar.gz")
    path = export_store(store, info, tmp_path / "sealed.tar.gz", decrypted=True).path
    report = run_import(gm, ws.id, ArchiveSource(path), name="sealed again")
    target = gm.store(ws.id, report.store_id)
    assert gm.catalog.store(report.store_id).encrypted
    assert snapshot(target) == snapshot(store)
    blob = target.repo[target.get_by_path("/people/sam.md").blob_id].read_raw()
    assert b"door" not in blob  # ciphertext at rest, under the new store's own key
