"""Encryption at rest: keys, the deterministic codec, the key ring, and the Git filter on real repos."""

from __future__ import annotations

import base64
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gitmem.config.handoff import from_environment
from gitmem.config.home import master_key
from gitmem.config.settings import SettingsError
from gitmem.crypto.codec import ContentCodec, PlainCodec, SivCodec, is_encrypted, parse_header
from gitmem.crypto.keyring import KeyRing
from gitmem.crypto.master_key import (
    MASTER_KEY_ENV,
    MASTER_KEY_FILE_ENV,
    DataKey,
    DecryptionFailed,
    InvalidKey,
    KeyMissing,
    MasterKey,
    export_key,
    import_key,
    load_master_key,
)
from gitmem.errors import GitmemError
from gitmem.git.crypt_filter import ATTRIBUTES_LINE, configure_clone
from tests import REPO_ROOT

STORE = "memstore_01TEST"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No user/system Git config and no master key from the developer's shell leaks into a test.
    home = tmp_path / "userhome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", MASTER_KEY_ENV, MASTER_KEY_FILE_ENV):
        monkeypatch.delenv(var, raising=False)
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "tester")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "tester@example.com")


@pytest.fixture
def master() -> MasterKey:
    return MasterKey(os.urandom(32))


def codec(key: DataKey | None = None, store: str = STORE) -> SivCodec:
    return SivCodec(key or DataKey.generate(), store)


# --- codec ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("plaintext", [b"", b"hello", "## Acme\n- caf\u00e9\n".encode(), os.urandom(70_000)])
def test_siv_round_trip(plaintext: bytes) -> None:
    c = codec()
    blob = c.encode("people/sam.md", plaintext)
    assert blob.startswith(b"GITMEM-SIV1 " + c.key_id.encode() + b" people/sam.md\n")
    assert is_encrypted(blob)
    assert c.decode("people/sam.md", blob) == plaintext
    if plaintext:
        assert plaintext not in blob


def test_siv_is_deterministic_per_store_and_path() -> None:
    key = DataKey.generate()
    c = codec(key)
    text = b"always run terraform plans against staging first"
    assert c.encode("a.md", text) == c.encode("a.md", text) == SivCodec(key, STORE).encode("a.md", text)
    assert c.encode("/a.md", text) == c.encode("a.md", text)  # the API's leading slash binds like Git's path
    assert c.encode("a.md", text) != c.encode("b.md", text)
    assert c.encode("a.md", text) != codec(key, "memstore_OTHER").encode("a.md", text)
    assert c.encode("a.md", text) != c.encode("a.md", text + b".")


def test_path_with_spaces_and_unicode_round_trips() -> None:
    c = codec()
    path = "/notes/caf\u00e9 menu/plan 1.md"
    blob = c.encode(path, b"x")
    header = parse_header(blob)
    assert header is not None and header.path == "notes/caf\u00e9 menu/plan 1.md"
    assert blob.split(b"\n", 1)[0].isascii()
    assert c.decode(path, blob) == b"x"
    assert c.decode_any_path(blob) == b"x"


def test_wrong_key_fails_with_typed_error() -> None:
    blob = codec().encode("a.md", b"secret plan")
    with pytest.raises(DecryptionFailed) as info:
        codec().decode("a.md", blob)
    assert isinstance(info.value, GitmemError)


def test_same_key_id_but_tampered_body_fails() -> None:
    c = codec()
    blob = bytearray(c.encode("a.md", b"secret plan"))
    blob[-1] ^= 0x01
    with pytest.raises(DecryptionFailed):
        c.decode("a.md", bytes(blob))


def test_tampered_header_moved_blob_and_other_store_fail() -> None:
    key = DataKey.generate()
    c = codec(key)
    blob = c.encode("a.md", b"secret plan")
    with pytest.raises(DecryptionFailed):
        c.decode("b.md", blob)  # moved to another path
    with pytest.raises(DecryptionFailed):
        codec(key, "memstore_OTHER").decode("a.md", blob)  # copied into another store
    with pytest.raises(DecryptionFailed):
        c.decode("b.md", blob.replace(b" a.md\n", b" b.md\n", 1))  # header rewritten to match
    with pytest.raises(DecryptionFailed):
        c.decode("a.md", blob.replace(c.key_id.encode(), b"0" * 12, 1))
    with pytest.raises(DecryptionFailed):
        c.decode("a.md", b"plain text, never encrypted")


def test_plain_codec_is_identity_and_both_are_content_codecs() -> None:
    plain = PlainCodec()
    assert plain.encode("a.md", b"x") == b"x" and plain.decode("a.md", b"x") == b"x"
    assert isinstance(plain, ContentCodec) and isinstance(codec(), ContentCodec)


def test_old_keys_decode_but_only_the_current_key_encodes() -> None:
    old, new = DataKey.generate(), DataKey.generate()
    old_blob = SivCodec(old, STORE).encode("a.md", b"v1")
    both = SivCodec(new, STORE, old_keys=[old])
    assert both.decode("a.md", old_blob) == b"v1"
    assert parse_header(both.encode("a.md", b"v1")).key_id == new.key_id  # type: ignore[union-attr]


# --- keys -----------------------------------------------------------------------------------------


def test_wrap_unwrap_and_wrong_owner(master: MasterKey) -> None:
    key, wrapped = master.new_data_key("user_A")
    assert key.material not in wrapped
    assert master.unwrap("user_A", wrapped) == key
    with pytest.raises(DecryptionFailed):
        master.unwrap("user_B", wrapped)
    with pytest.raises(DecryptionFailed):
        MasterKey(os.urandom(32)).unwrap("user_A", wrapped)
    tampered = bytearray(wrapped)
    tampered[-3] ^= 0x80
    with pytest.raises(DecryptionFailed):
        master.unwrap("user_A", bytes(tampered))
    # Wrapping is randomized (fresh nonce) but the key id is stable.
    again = master.wrap("user_A", key)
    assert again != wrapped and master.unwrap("user_A", again).key_id == key.key_id


def test_keys_never_show_in_repr(master: MasterKey) -> None:
    key = DataKey.generate()
    assert key.material.hex() not in repr(key) and str(key.material) not in repr(key)
    assert str(master.material) not in repr(master)


def test_export_import_round_trip() -> None:
    key = DataKey.generate()
    text = export_key(key)
    assert import_key(text) == key
    assert import_key(base64.urlsafe_b64encode(key.material).decode().rstrip("=")) == key
    assert import_key(key.material.hex()) == key
    with pytest.raises(InvalidKey):
        import_key(base64.b64encode(os.urandom(32)).decode())
    with pytest.raises(InvalidKey):
        import_key("not a key!")


def test_master_key_generated_once_with_mode_0600(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "gitmem-home"
    with caplog.at_level(logging.INFO, logger="gitmem.crypto.master_key"):
        first = load_master_key(home)
    path = home / "master.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert str(path) in caplog.text
    secret_text = path.read_text().strip()
    assert secret_text not in caplog.text and first.material.hex() not in caplog.text
    assert len(first.material) == 32
    assert load_master_key(home) == first  # stable across restarts
    assert [p.name for p in home.iterdir()] == ["master.key"]  # no temp files left behind


def test_master_key_from_the_settings_text_or_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = os.urandom(48)
    for text in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode(), raw.hex()):
        monkeypatch.setenv(MASTER_KEY_ENV, text)
        assert load_master_key(tmp_path / "h", master_key(from_environment().keys)).material == raw
    assert not (tmp_path / "h").exists()  # nothing generated when the env gives the key
    monkeypatch.delenv(MASTER_KEY_ENV)

    text_file = tmp_path / "k.txt"
    text_file.write_text(base64.b64encode(raw).decode() + "\n")
    monkeypatch.setenv(MASTER_KEY_FILE_ENV, str(text_file))
    assert load_master_key(tmp_path / "h", master_key(from_environment().keys)).material == raw
    binary_file = tmp_path / "k.bin"
    binary_file.write_bytes(b"\xff" + raw)
    monkeypatch.setenv(MASTER_KEY_FILE_ENV, str(binary_file))
    assert load_master_key(tmp_path / "h", master_key(from_environment().keys)).material == b"\xff" + raw

    monkeypatch.delenv(MASTER_KEY_FILE_ENV)
    monkeypatch.setenv(MASTER_KEY_ENV, base64.b64encode(os.urandom(16)).decode())
    with pytest.raises(SettingsError, match="at least 32 bytes"):  # a bad setting, caught when read
        load_master_key(tmp_path / "h", master_key(from_environment().keys))


# --- key ring -------------------------------------------------------------------------------------


def test_keyring_rotate_keeps_old_blobs_readable_until_destroyed(tmp_path: Path, master: MasterKey) -> None:
    ring_path = tmp_path / "keys.json"
    ring = KeyRing(ring_path, master)
    with pytest.raises(KeyMissing):
        ring.current("user_A")
    first = ring.ensure("user_A")
    assert ring.ensure("user_A") == first == ring.current("user_A")
    assert stat.S_IMODE(ring_path.stat().st_mode) == 0o600
    assert first.material not in ring_path.read_bytes()
    assert base64.b64encode(first.material) not in ring_path.read_bytes()
    other = ring.ensure("user_B")

    old_blob = ring.codec("user_A", STORE).encode("a.md", b"before rotation")
    second = ring.rotate("user_A")
    assert second.key_id != first.key_id and ring.current("user_A") == second
    assert [r.key_id for r in ring.records("user_A")] == [first.key_id, second.key_id]
    assert ring.key("user_A", first.key_id) == first

    reopened = KeyRing(ring_path, master)  # another process sees the same ring
    both = reopened.codec("user_A", STORE)
    assert both.key_id == second.key_id
    assert both.decode("a.md", old_blob) == b"before rotation"
    new_blob = both.encode("a.md", b"after rotation")

    reopened.retire("user_A", keep=[second.key_id])
    with pytest.raises(DecryptionFailed):
        ring.codec("user_A", STORE).decode("a.md", old_blob)
    assert ring.codec("user_A", STORE).decode("a.md", new_blob) == b"after rotation"

    wrapped_before = [r.wrapped for r in ring.records("user_A")]
    ring.destroy("user_A")
    for r in (ring, KeyRing(ring_path, master)):
        with pytest.raises(KeyMissing):
            r.current("user_A")
        with pytest.raises(KeyMissing):
            r.codec("user_A", STORE)
    assert not any(base64.b64encode(w) in ring_path.read_bytes() for w in wrapped_before)
    assert ring.current("user_B") == other  # other owners are untouched
    ring.destroy("user_A")  # idempotent
    # A fresh key for the same owner does not bring the old blobs back.
    assert ring.ensure("user_A").key_id != second.key_id
    with pytest.raises(DecryptionFailed):
        ring.codec("user_A", STORE).decode("a.md", new_blob)


def test_keyring_needs_the_right_master_key(tmp_path: Path, master: MasterKey) -> None:
    KeyRing(tmp_path / "keys.json", master).ensure("user_A")
    with pytest.raises(DecryptionFailed):
        KeyRing(tmp_path / "keys.json", MasterKey(os.urandom(32))).current("user_A")


# --- Git: real repositories, real filters -----------------------------------------------------------


def git(cwd: Path, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
    done = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout


def _write_tree(bare: Path, files: dict[str, bytes]) -> str:
    entries: list[str] = []
    folders: dict[str, dict[str, bytes]] = {}
    for path, blob in files.items():
        head, sep, rest = path.partition("/")
        if sep:
            folders.setdefault(head, {})[rest] = blob
        else:
            sha = git(bare, "hash-object", "-w", "--stdin", input=blob).decode().strip()
            entries.append(f"100644 blob {sha}\t{head}")
    for name, sub in folders.items():
        entries.append(f"040000 tree {_write_tree(bare, sub)}\t{name}")
    return git(bare, "mktree", input="".join(e + "\n" for e in entries).encode()).decode().strip()


def commit_encrypted(bare: Path, c: SivCodec, notes: dict[str, bytes], message: str) -> str:
    """What the engine does: encrypt each note at its tree path, then build blobs/trees/commit directly."""
    tree = _write_tree(bare, {p: c.encode(p, text) for p, text in notes.items()})
    parent = git(bare, "rev-parse", "-q", "--verify", "refs/heads/main", check=False).decode().strip()
    args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
    commit = git(bare, *args).decode().strip()
    git(bare, "update-ref", "refs/heads/main", commit)
    return commit


def all_objects(repo: Path) -> bytes:
    return git(repo, "cat-file", "--batch-all-objects", "--batch")


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, SivCodec]:
    bare = tmp_path / f"{STORE}.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    c = codec()
    commit_encrypted(bare, c, {"preferences.md": b"SECRET-PREF-ONE\n"}, "created /preferences.md")
    commit_encrypted(
        bare,
        c,
        {"preferences.md": b"SECRET-PREF-TWO\n", "projects/acme.md": b"## Acme Corp\nSECRET-SOC2\n"},
        "modified /preferences.md",
    )
    return bare, c


PLAINTEXTS = (b"SECRET-PREF-ONE", b"SECRET-PREF-TWO", b"SECRET-SOC2")


def test_bare_store_holds_no_plaintext(store: tuple[Path, SivCodec]) -> None:
    bare, _ = store
    objects = all_objects(bare)
    assert b"GITMEM-SIV1" in objects
    assert not any(p in objects for p in PLAINTEXTS)


def test_clone_without_key_shows_no_plaintext(tmp_path: Path, store: tuple[Path, SivCodec]) -> None:
    bare, _ = store
    clone = tmp_path / "plain-clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    log_p = git(clone, "log", "-p", "--text")
    assert b"preferences.md" in log_p  # paths stay visible (documented)
    assert not any(p in log_p for p in PLAINTEXTS)
    content = (clone / "preferences.md").read_bytes()
    assert content.startswith(b"GITMEM-SIV1 ") and b"SECRET" not in content


@pytest.mark.parametrize("mode", ["process", "one-shot"])
def test_clone_with_key_shows_plaintext_and_round_trips(
    tmp_path: Path, store: tuple[Path, SivCodec], mode: str
) -> None:
    bare, c = store
    clone = tmp_path / "keyed-clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    configure_clone(clone, export_key(c.data_key), STORE)
    if mode == "one-shot":
        git(clone, "config", "--unset", "filter.gitmem.process")

    attributes = Path(git(clone, "rev-parse", "--git-path", "info/attributes").decode().strip())
    assert ATTRIBUTES_LINE in (clone / attributes).read_text().splitlines()
    assert stat.S_IMODE((clone / ".git" / "config").stat().st_mode) == 0o600

    # The existing checkout was rewritten through smudge, and is clean.
    assert (clone / "preferences.md").read_bytes() == b"SECRET-PREF-TWO\n"
    assert (clone / "projects" / "acme.md").read_bytes() == b"## Acme Corp\nSECRET-SOC2\n"
    assert git(clone, "status", "--porcelain") == b""
    # `git add` of the unchanged file cleans to the identical blob (deterministic encryption).
    git(clone, "add", "--renormalize", ".")
    assert git(clone, "status", "--porcelain") == b""

    log_p = git(clone, "log", "-p")
    assert b"-SECRET-PREF-ONE" in log_p and b"+SECRET-PREF-TWO" in log_p and b"+SECRET-SOC2" in log_p
    assert b"GITMEM-SIV1" not in log_p
    assert b"+SECRET-PREF-ONE" in git(clone, "show", "HEAD~1")

    # Edits and new files are committed encrypted and the engine's codec reads them.
    (clone / "preferences.md").write_bytes(b"SECRET-PREF-THREE\n")
    (clone / "projects" / "new note.md").write_bytes(b"SECRET-NEW\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "edit from a clone")
    git(clone, "push", "-q", "origin", "main")
    objects = all_objects(bare)
    assert b"SECRET-PREF-THREE" not in objects and b"SECRET-NEW" not in objects
    blob = git(bare, "cat-file", "blob", "main:preferences.md")
    assert c.decode("/preferences.md", blob) == b"SECRET-PREF-THREE\n"
    new_blob = git(bare, "cat-file", "blob", "main:projects/new note.md")
    assert c.decode("/projects/new note.md", new_blob) == b"SECRET-NEW\n"
    assert b"+SECRET-PREF-THREE" in git(clone, "log", "-p", "-1")

    # A fresh keyed clone made by fetching what the clone pushed agrees byte for byte.
    again = tmp_path / "again"
    git(tmp_path, "clone", "-q", "--no-checkout", str(bare), str(again))
    configure_clone(again, export_key(c.data_key), STORE)
    git(again, "checkout", "-q", "main")
    assert (again / "projects" / "new note.md").read_bytes() == b"SECRET-NEW\n"
    assert git(again, "status", "--porcelain") == b""


def test_wrong_key_clone_stays_encrypted_and_clean(tmp_path: Path, store: tuple[Path, SivCodec]) -> None:
    bare, _ = store
    clone = tmp_path / "wrong"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    configure_clone(clone, export_key(DataKey.generate()), STORE)
    assert (clone / "preferences.md").read_bytes().startswith(b"GITMEM-SIV1 ")
    assert git(clone, "status", "--porcelain") == b""
    assert not any(p in git(clone, "log", "-p", "--text") for p in PLAINTEXTS)


def test_clean_refuses_without_a_key(tmp_path: Path, store: tuple[Path, SivCodec]) -> None:
    bare, c = store
    clone = tmp_path / "nokey"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    configure_clone(clone, export_key(c.data_key), STORE)
    git(clone, "config", "--unset", "gitmem.key")
    (clone / "leak.md").write_bytes(b"SECRET-LEAK\n")
    assert subprocess.run(["git", "add", "leak.md"], cwd=clone, capture_output=True).returncode != 0
    assert b"SECRET-LEAK" not in all_objects(clone)


def test_filter_commands_directly(tmp_path: Path, store: tuple[Path, SivCodec]) -> None:
    bare, c = store
    clone = tmp_path / "direct"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    configure_clone(clone, export_key(c.data_key), STORE)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    def run(*args: str, data: bytes = b"") -> bytes:
        cmd = [sys.executable, "-m", "gitmem", "git-filter", *args]
        return subprocess.run(cmd, cwd=clone, input=data, capture_output=True, check=True, env=env).stdout

    blob = c.encode("a/b.md", b"hi there")
    assert run("smudge", "a/b.md", data=blob) == b"hi there"
    assert run("clean", "a/b.md", data=b"hi there") == blob
    assert run("clean", "a/b.md", data=blob) == blob  # already encrypted: unchanged
    assert run("smudge", "a/b.md", data=b"not encrypted") == b"not encrypted"
    assert run("smudge", "other.md", data=blob) == blob  # moved blob: left alone, not "decrypted"
    tmp_file = tmp_path / "XXXXXX_b.md"
    tmp_file.write_bytes(blob)
    assert run("textconv", str(tmp_file)) == b"hi there"
    # A clone configured by an older gitmem names the filter's module; it still works.
    old_command = [sys.executable, "-m", "gitmem.git.crypt_filter", "smudge", "a/b.md"]
    assert (
        subprocess.run(old_command, cwd=clone, input=blob, capture_output=True, check=True, env=env).stdout
        == b"hi there"
    )
    usage = subprocess.run([sys.executable, "-m", "gitmem", "git-filter"], capture_output=True, env=env)
    assert usage.returncode == 2
