"""``gitmem backup``, ``gitmem backup prune`` and ``gitmem restore SRC --home NEW`` through the CLI, and a
home whose catalog is in PostgreSQL backed up and restored into another database."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gitmem.backup.restore import restore_home
from gitmem.backup.take import take_backup
from gitmem.cli import main
from gitmem.engine.gitmem import Gitmem
from tests import postgres


def test_backup_restore_and_prune_commands(tmp_path: Path) -> None:
    runner = CliRunner()
    home, dest, new = tmp_path / "home", tmp_path / "dest", tmp_path / "new"

    def run(*args: str, input: str | None = None, at: Path = home) -> Result:
        return runner.invoke(main, ["--home", str(at), *args], input=input, catch_exceptions=False)

    sid = run("store", "create", "notes").output.strip()
    run("note", "put", sid, "/a.md", input="first")
    made = run("backup", str(dest))
    assert made.exit_code == 0, made.output
    assert "1 stores: 1 copied" in made.output and "master key: not written" in made.output
    again = run("backup", "create", str(dest))
    assert "0 copied (0 B), 1 unchanged since gitmem-backup-" in again.output
    usage = run("restore", str(dest))
    assert usage.exit_code == 2 and "--home NEW" in usage.output
    restored = run("restore", str(dest), "--home", str(new))
    assert restored.exit_code == 0, restored.output
    assert "gitmem fsck: every store ok" in restored.output
    assert run("note", "get", sid, "/a.md", at=new).output == "first"
    assert run("fsck", at=new).exit_code == 0
    refused = run("restore", str(dest), "--home", str(new))
    assert refused.exit_code == 1 and "is not empty" in refused.output
    (new / "RESTORING").write_text("as a crash mid-restore leaves it")
    unfinished = run("serve", at=new)
    assert unfinished.exit_code == 1 and "has not finished" in unfinished.output
    pruned = run("backup", "prune", str(dest), "--older-than", "0s")
    assert pruned.output.startswith("dropped gitmem-backup-") and "1 backups dropped" in pruned.output
    assert run("backup", "prune", str(dest), "--older-than", "soon").exit_code == 2


def test_a_postgresql_home_backs_up_and_restores_into_another_database(tmp_path: Path) -> None:
    cluster = postgres.cluster()
    if cluster is None:
        pytest.skip(postgres.SKIP_REASON)
    gm = Gitmem.open(tmp_path / "home", database=cluster.fresh_database(), fsync="never")
    ws = gm.catalog.create_workspace("team")
    info = gm.create_store(ws.id, "notes")
    store = gm.store(ws.id, info.id)
    first = store.create("/a.md", "on postgres")
    store.update(first.id, "on postgres, twice")
    report = take_backup(gm, tmp_path / "dest")
    assert report.manifest.database == "postgresql"
    target = cluster.fresh_database()
    restored = restore_home(report.folder, tmp_path / "new", database=target)
    assert restored.ok, restored.problems
    new = Gitmem.open(tmp_path / "new", database=target)
    again = new.store(ws.id, info.id)
    assert again.get(first.id).content == "on postgres, twice"
    assert [v.id for v in again.versions().items] == [v.id for v in store.versions().items]
    with pytest.raises(Exception, match="catalog already"):
        restore_home(report.folder, tmp_path / "newer", database=target)
    new.close()
    gm.close()
