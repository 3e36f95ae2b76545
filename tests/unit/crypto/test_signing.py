"""The home's signing key and Ed25519 SSH signatures (docs/audit.md), checked against ``ssh-keygen``."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

from gitmem.config.settings import SettingsError, load_settings
from gitmem.crypto import sshsig
from gitmem.crypto.signing_key import HomeSigner, SigningKeyError, SigningKeySource, known_keys, rotate
from gitmem.engine.gitmem import Gitmem
from gitmem.git.signing import signed, split


def test_a_signature_verifies_with_ssh_keygen_and_breaks_with_one_byte(tmp_path: Path) -> None:
    signer = HomeSigner(tmp_path)
    message = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nhello\n"
    armored = signer.sign(message)
    (tmp_path / "m.sig").write_bytes(armored)
    args = ["ssh-keygen", "-Y", "verify", "-f", str(tmp_path / "allowed_signers"), "-I", "gitmem@localhost"]
    good = subprocess.run([*args, "-n", "git", "-s", str(tmp_path / "m.sig")], input=message, capture_output=True)
    assert good.returncode == 0, good.stderr
    parsed = sshsig.parse(armored)
    assert parsed.key == signer.public and parsed.verify(message)
    assert not parsed.verify(message + b"x") and not parsed.verify(message, namespace="file")
    assert sshsig.parse(HomeSigner(tmp_path / "other").sign(message)).key != signer.public


def test_signed_commit_bytes_split_back_into_what_was_signed(tmp_path: Path) -> None:
    signer = HomeSigner(tmp_path)
    body = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor a <a@b> 1 +0000\ncommitter a <a@b> 1 +0000\n\nhi\n"
    data = signed(body, signer)
    assert data != body and b"\ngpgsig -----BEGIN SSH SIGNATURE-----\n " in data
    payload, armored = split(data)
    assert payload == body and armored is not None and sshsig.parse(armored).verify(body)
    assert split(body) == (body, None) and signed(body, None) == body


def test_the_key_is_made_with_the_home_kept_private_and_never_in_repr(tmp_path: Path) -> None:
    gm = Gitmem.open(tmp_path / "home", fsync="never")
    key_file = tmp_path / "home" / "signing.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert b"OPENSSH PRIVATE KEY" in key_file.read_bytes()
    assert "PRIVATE" not in repr(gm.signer.key) and [k.key for k in known_keys(gm.home)] == [gm.signer.public]
    assert Gitmem.open(tmp_path / "home", fsync="never").signer.public == gm.signer.public  # the same key again


def test_a_bad_or_missing_key_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(SigningKeyError, match="cannot read"):
        Gitmem.open(tmp_path / "home", signing_key=SigningKeySource(file=tmp_path / "missing.key"))
    with pytest.raises(SigningKeyError, match="Ed25519"):
        Gitmem.open(tmp_path / "home", signing_key=SigningKeySource(text="not a key"))
    (tmp_path / "rsa.key").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n")
    env = {"GITMEM_HOME": str(tmp_path / "home"), "GITMEM_SIGNING_KEY_FILE": str(tmp_path / "rsa.key")}
    with pytest.raises(SettingsError, match="GITMEM_SIGNING_KEY_FILE"):
        load_settings(env)
    with pytest.raises(SettingsError, match="GITMEM_SIGNING_KEY"):
        load_settings({"GITMEM_HOME": str(tmp_path / "home"), "GITMEM_SIGNING_KEY": "abc"})
    assert not (tmp_path / "home" / "stores").exists() or not list((tmp_path / "home" / "stores").iterdir())


def test_a_key_given_as_its_seed_signs_as_that_key(tmp_path: Path) -> None:
    seed = "11" * 32
    one = HomeSigner(tmp_path / "a", SigningKeySource(text=seed))
    two = HomeSigner(tmp_path / "b", SigningKeySource(text=seed))
    assert one.public == two.public
    with pytest.raises(SigningKeyError, match="GITMEM_SIGNING_KEY"):
        rotate(tmp_path / "a", SigningKeySource(text=seed), dt.datetime.now(dt.UTC))
