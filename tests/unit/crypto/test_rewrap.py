"""`gitmem encryption rewrap`: the key ring wrapped again under a new master key; stores stay readable under
the new key and not under the old one."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitmem.cli import main
from gitmem.config.handoff import from_environment
from gitmem.config.home import master_key
from gitmem.crypto.master_key import DecryptionFailed
from gitmem.engine.gitmem import Gitmem


def _opened(home: Path) -> Gitmem:
    """The home with the master key the settings name now (``GITMEM_MASTER_KEY``, else ``master.key``)."""
    return Gitmem.open(home, fsync="never", master_key=master_key(from_environment().keys))


def _encrypted_home(home: Path) -> tuple[str, str]:
    gm = _opened(home)
    ws = gm.catalog.create_workspace("alpha")
    info = gm.create_store(ws.id, "secret notes", encrypted=True)
    gm.store(ws.id, info.id).create("/plan.md", "the secret plan")
    return ws.id, info.id


def _read(home: Path, ws_id: str, store_id: str) -> str:
    gm = _opened(home)
    return gm.store(ws_id, store_id).get_by_path("/plan.md").content or ""


def _clean_env() -> dict[str, str | None]:
    return {name: None for name in os.environ if name.startswith("GITMEM_")}


def test_rewrap_with_the_home_master_key_replaces_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("GITMEM_")]:
        monkeypatch.delenv(name)
    home = tmp_path / "home"
    ws_id, store_id = _encrypted_home(home)
    old_key = (home / "master.key").read_text()
    result = CliRunner().invoke(main, ["--home", str(home), "encryption", "rewrap"], env=_clean_env())
    assert result.exit_code == 0, result.output
    assert "re-wrapped 1 data keys" in result.stdout
    new_key = (home / "master.key").read_text()
    assert new_key != old_key and oct((home / "master.key").stat().st_mode & 0o777) == "0o600"
    assert not (home / "master.key.new").exists()
    assert old_key.strip() not in (home / "keys.json").read_text()

    assert _read(home, ws_id, store_id) == "the secret plan"  # under the new key, from master.key
    monkeypatch.setenv("GITMEM_MASTER_KEY", old_key.strip())
    with pytest.raises(DecryptionFailed):
        _read(home, ws_id, store_id)


def test_rewrap_to_a_given_key_when_the_key_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("GITMEM_")]:
        monkeypatch.delenv(name)
    old_key, new_key = base64.b64encode(os.urandom(32)).decode(), os.urandom(32).hex()
    monkeypatch.setenv("GITMEM_MASTER_KEY", old_key)
    home = tmp_path / "home"
    ws_id, store_id = _encrypted_home(home)
    ring_before = (home / "keys.json").read_text()

    refused = CliRunner().invoke(main, ["--home", str(home), "encryption", "rewrap"])
    assert refused.exit_code == 1 and "--new-key-file" in refused.output
    assert (home / "keys.json").read_text() == ring_before  # nothing changed

    key_file = tmp_path / "new.key"
    key_file.write_text(new_key + "\n")
    done = CliRunner().invoke(main, ["--home", str(home), "encryption", "rewrap", "--new-key-file", str(key_file)])
    assert done.exit_code == 0, done.output
    assert not (home / "master.key").exists()  # the home file is not involved

    with pytest.raises(DecryptionFailed):
        _read(home, ws_id, store_id)  # the old key (still in the environment) opens nothing
    monkeypatch.setenv("GITMEM_MASTER_KEY", new_key)
    assert _read(home, ws_id, store_id) == "the secret plan"

    again = CliRunner().invoke(main, ["--home", str(home), "encryption", "rewrap", "--new-key-file", str(key_file)])
    assert again.exit_code == 1 and "is the current one" in again.output


def test_the_old_spelling_under_keys_still_works_and_says_where_it_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("GITMEM_")]:
        monkeypatch.delenv(name)
    home = tmp_path / "home"
    _, store_id = _encrypted_home(home)
    new = CliRunner().invoke(main, ["--home", str(home), "encryption", "export", store_id])
    old = CliRunner().invoke(main, ["--home", str(home), "keys", "export", store_id])
    assert new.exit_code == old.exit_code == 0, old.output
    assert old.stdout == new.stdout and new.stdout.strip()  # the same key
    assert "is now 'gitmem encryption export'" in old.stderr and "is now" not in new.stderr
    listed = CliRunner().invoke(main, ["--home", str(home), "keys", "--help"])
    assert "export" not in listed.stdout  # hidden: `keys` lists API keys' commands only
