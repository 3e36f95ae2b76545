"""Importing a folder of Markdown files: every file a note; what the rules refuse is listed and left out."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import main
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.transfer.folder import FolderSource
from gitmem.engine.transfer.replay import run_import


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "people").mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "app.json").write_text("{}")  # the tool's own: passed over
    (root / "people" / "sam.md").write_text("Sam prefers staging first.\n")
    (root / "Daily.md").write_text("# Daily\n- standup at 9\n")
    (root / "daily.md").write_text("the case twin of Daily.md\n")
    (root / "secrets.md").write_text("password = hunter2!!\n")
    (root / "big.md").write_text("x" * 200_000)
    (root / "..\\escape.md").write_text("a name Windows reads as going up a folder\n")
    (root / "projects").mkdir()
    (root / "projects" / "acme.md").write_text("# Acme\n- single-tenant\n")
    return root


def test_a_vault_imports_every_good_file_and_lists_the_four_refused(gm: Gitmem, vault: Path) -> None:
    ws = gm.catalog.create_workspace("vault")
    report = run_import(gm, ws.id, FolderSource(vault))
    refused = {r.path: r.reason for r in report.refused}
    assert sorted(refused) == ["..\\escape.md", "big.md", "daily.md", "secrets.md"]
    assert "saved password on line 1" in refused["secrets.md"]
    assert refused["big.md"] == "200000 bytes; a note holds at most 102400"
    assert refused["daily.md"].startswith("differs only in case from Daily.md")
    assert "U+005C" in refused["..\\escape.md"]
    store = gm.store(ws.id, report.store_id)
    notes = {n.path: store.get(n.id).content for n in store.list(limit=100).items}  # type: ignore[union-attr]
    assert notes == {
        "/Daily.md": "# Daily\n- standup at 9\n",
        "/people/sam.md": "Sam prefers staging first.\n",
        "/projects/acme.md": "# Acme\n- single-tenant\n",
    }
    assert gm.catalog.store(report.store_id).name == "vault"
    # One commit a file, by the service.
    assert [v.operation for v in store.versions().items] == ["created"] * 3
    assert {v.created_by for v in store.versions().items} == {None}


def test_with_mtime_each_file_is_dated_by_its_modification_time_oldest_first(gm: Gitmem, vault: Path) -> None:
    times = {"people/sam.md": 1_700_000_000, "Daily.md": 1_600_000_000, "projects/acme.md": 1_650_000_000.25}
    for name, when in times.items():
        os.utime(vault / name, (when, when))
    ws = gm.catalog.create_workspace("vault")
    report = run_import(gm, ws.id, FolderSource(vault, use_mtime=True))
    versions = list(reversed(gm.store(ws.id, report.store_id).versions().items))
    assert [(v.path, v.created_at) for v in versions] == [
        ("/Daily.md", dt.datetime.fromtimestamp(1_600_000_000, dt.UTC)),
        ("/projects/acme.md", dt.datetime.fromtimestamp(1_650_000_000.25, dt.UTC)),
        ("/people/sam.md", dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)),
    ]


def test_the_cli_lists_the_refused_files(gm: Gitmem, vault: Path) -> None:
    out = CliRunner().invoke(main, ["--home", str(gm.home), "import", str(vault), "-w", "vault"])
    assert out.exit_code == 0, out.output
    assert "refused big.md: 200000 bytes; a note holds at most 102400" in out.output
    assert out.output.strip().splitlines()[-1].startswith("imported 3 versions into memstore_")
    assert out.output.strip().endswith("; 4 files refused")
