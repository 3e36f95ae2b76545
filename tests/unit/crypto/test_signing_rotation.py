"""Rotating the signing key (``gitmem audit rotate-key``): commits from before and after all verify
with stock ``git``; the old key, past its ``valid-before``, verifies nothing new (docs/audit.md)."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pygit2
from click.testing import CliRunner

from gitmem.cli import main
from gitmem.clock import FrozenClock
from gitmem.crypto.signing_key import known_keys
from gitmem.crypto.sshsig import SigningKey
from gitmem.engine.audit.verify import Signatures
from gitmem.engine.gitmem import Gitmem
from gitmem.git import repository
from gitmem.git.signing import signed
from gitmem.git.trees import commit_body


def _verify(repo: Path, home: Path, commit: str) -> subprocess.CompletedProcess[str]:
    config = ["-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={home / 'allowed_signers'}"]
    return subprocess.run(["git", *config, "verify-commit", commit], cwd=repo, capture_output=True, text=True)


def test_commits_from_before_and_after_a_rotation_all_verify(tmp_path: Path) -> None:
    clock = FrozenClock(dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))  # the CLI rotates at the real time
    home = tmp_path / "home"
    gm = Gitmem.open(home, clock=clock, fsync="never")
    info = gm.create_store(gm.catalog.create_workspace("w").id, "notes")
    store = gm.store(info.workspace_id, info.id)
    store.create("/a.md", "before")
    old_key = SigningKey.from_text((home / "signing.key").read_bytes())
    clock.advance(hours=1)
    result = CliRunner().invoke(main, ["audit", "rotate-key"], env={"GITMEM_HOME": str(home)})
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"closed  {old_key.public.fingerprint}"
    clock.advance(hours=1)
    store.create("/b.md", "after")  # the running home signs with the new key at once
    keys = known_keys(home)
    assert keys[0].key == old_key.public and keys[0].valid_before is not None
    assert keys[1].valid_before is None and keys[1].key != old_key.public
    assert 'valid-before="' in (home / "allowed_signers").read_text()
    repo_path = gm.repo_path(info.id)
    commits = subprocess.run(["git", "rev-list", "main"], cwd=repo_path, capture_output=True, text=True).stdout
    newest, oldest = commits.split()
    for commit in (newest, oldest):
        assert _verify(repo_path, home, commit).returncode == 0
    repo = pygit2.Repository(str(repo_path))
    signatures = Signatures(keys)
    assert signatures.problem(repo[newest].read_raw()) is None and signatures.problem(repo[oldest].read_raw()) is None

    # The old key, used after its valid-before, signs nothing that verifies.
    late = repository.commit_at(repo, newest)
    author = pygit2.Signature("gitmem", "gitmem@localhost", late.commit_time, 0)
    body = commit_body(late.tree.id.raw, [late.id.raw], author, author, "created /late.md\n")
    stale = signed(body, _Old(old_key))
    oid = repo.odb.write(pygit2.enums.ObjectType.COMMIT, stale)
    expired = _verify(repo_path, home, str(oid))
    assert expired.returncode != 0 and "expired" in expired.stderr
    assert "valid-before" in (signatures.problem(stale) or "")


class _Old:
    def __init__(self, key: SigningKey) -> None:
        self.key = key

    def sign(self, payload: bytes) -> bytes:
        return self.key.sign(payload)


def test_the_signing_key_under_keys_still_answers_and_says_it_moved_to_audit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Gitmem.open(home, fsync="never")
    env = {"GITMEM_HOME": str(home)}
    new = CliRunner().invoke(main, ["audit", "key"], env=env)
    old = CliRunner().invoke(main, ["keys", "signing"], env=env)
    assert new.exit_code == old.exit_code == 0, old.output
    assert old.stdout == new.stdout and new.stdout.startswith("ssh-ed25519 ")  # the same key
    assert "is now 'gitmem audit key'" in old.stderr and "is now" not in new.stderr
    listed = CliRunner().invoke(main, ["keys", "--help"], env=env).stdout
    assert "signing" not in listed and "create" in listed  # `keys` lists API keys' commands only
