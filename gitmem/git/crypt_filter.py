"""The Git side of encryption at rest: a clone holding the key sees plaintext.

Git runs it as (the commands are in :mod:`gitmem.cli.node.internal`)

- ``python -m gitmem git-filter process``: the long-running filter (protocol v2) for checkout/add, one
  process for all files, so a 10,000-note store does not start 10,000 interpreters;
- ``python -m gitmem git-filter smudge PATH`` / ``clean PATH``: the one-file-per-process fallback;
- ``python -m gitmem git-filter textconv FILE``: for ``git log -p`` / ``git diff``. Git passes a
  temporary file (or the already smudged worktree file), not the note's path, so the path comes from
  the blob's header.

Configuration (written by :func:`configure_clone`): ``gitmem.key`` (``export_key`` text; may be given
several times, the last one encrypts, all decrypt) and ``gitmem.storeid``.

``smudge`` and ``textconv`` never fail a checkout or a log: what they cannot decrypt passes through
unchanged, with a warning on stderr. ``clean`` does fail when it has no key (``filter.gitmem.required``
is set), so plaintext is never committed into an encrypted store by accident.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from gitmem.crypto.codec import SivCodec, parse_header
from gitmem.crypto.master_key import DataKey, DecryptionFailed, InvalidKey, export_key, import_key
from gitmem.errors import GitmemError

log = logging.getLogger("gitmem.git.crypt_filter")

DRIVER = "gitmem"
ATTRIBUTES_LINE = f"* filter={DRIVER} diff={DRIVER}"
_PKT_MAX = 65516  # largest pkt-line payload


class FilterNotConfigured(GitmemError):
    """The clone lacks ``gitmem.key`` or ``gitmem.storeid``."""


@dataclass(frozen=True)
class FilterConfig:
    keys: tuple[DataKey, ...]  # oldest first; the last one encrypts
    store_id: str

    def codec(self) -> SivCodec:
        return SivCodec(self.keys[-1], self.store_id, old_keys=self.keys[:-1])


def _git(args: Sequence[str], cwd: Path | None = None, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True, text=True)  # noqa: S603, S607  git from PATH, an argument list (no shell)


def read_config(cwd: Path | None = None) -> FilterConfig:
    keys_out = _git(["config", "--get-all", "gitmem.key"], cwd, check=False).stdout.split()
    store_id = _git(["config", "--get", "gitmem.storeid"], cwd, check=False).stdout.strip()
    if not keys_out or not store_id:
        raise FilterNotConfigured("this clone has no gitmem.key / gitmem.storeid (see `gitmem clone --key`)")
    try:
        keys = tuple(import_key(text) for text in keys_out)
    except InvalidKey as exc:
        raise FilterNotConfigured(f"gitmem.key is not a valid exported key: {exc.message}") from exc
    return FilterConfig(keys, store_id)


# --- the three transforms -------------------------------------------------------------------------


def smudge(config: FilterConfig | None, path: str, data: bytes) -> bytes:
    """Blob -> worktree: decrypt what carries the magic header, pass everything else through."""
    if parse_header(data) is None:
        return data
    if config is None:
        log.warning("gitmem: no key configured, %s stays encrypted", path)
        return data
    try:
        return config.codec().decode(path, data)
    except DecryptionFailed as exc:
        log.warning("gitmem: cannot decrypt %s (%s); left encrypted", path, exc.message)
        return data


def clean(config: FilterConfig | None, path: str, data: bytes) -> bytes:
    """Worktree -> blob: encrypt deterministically, so an unchanged checkout cleans to the same blob."""
    if parse_header(data) is not None:
        return data  # still encrypted (smudge could not open it): keep it byte for byte
    if config is None:
        raise FilterNotConfigured(f"refusing to commit {path} unencrypted: no gitmem.key configured")
    return config.codec().encode(path, data)


def textconv(config: FilterConfig | None, data: bytes) -> bytes:
    if parse_header(data) is None or config is None:
        return data
    try:
        return config.codec().decode_any_path(data)
    except DecryptionFailed as exc:
        log.warning("gitmem: cannot decrypt a blob for display (%s)", exc.message)
        return data


# --- long-running filter protocol (gitattributes(5), "Long Running Filter Process") -----------------


class _PktIO:
    def __init__(self, inp: BinaryIO, out: BinaryIO) -> None:
        self.inp, self.out = inp, out

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.inp.read(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def read(self) -> bytes | None:
        """One payload, or None for a flush packet."""
        size = int(self._read_exact(4), 16)
        if size == 0:
            return None
        return self._read_exact(size - 4)

    def read_text_list(self) -> list[str]:
        lines = []
        while (pkt := self.read()) is not None:
            lines.append(pkt.decode("utf-8").rstrip("\n"))
        return lines

    def read_content(self) -> bytes:
        parts = []
        while (pkt := self.read()) is not None:
            parts.append(pkt)
        return b"".join(parts)

    def write(self, payload: bytes) -> None:
        self.out.write(b"%04x" % (len(payload) + 4) + payload)

    def write_text(self, *lines: str) -> None:
        for line in lines:
            self.write(line.encode("utf-8") + b"\n")
        self.flush()

    def write_content(self, data: bytes) -> None:
        for i in range(0, len(data), _PKT_MAX):
            self.write(data[i : i + _PKT_MAX])
        self.flush()

    def flush(self) -> None:
        self.out.write(b"0000")
        self.out.flush()


def _pairs(lines: list[str]) -> dict[str, str]:
    return dict(line.partition("=")[::2] for line in lines)


def serve_process(config: FilterConfig | None, inp: BinaryIO, out: BinaryIO) -> None:
    io = _PktIO(inp, out)
    hello = io.read_text_list()
    if "git-filter-client" not in hello or "version=2" not in hello:
        raise GitmemError("unexpected filter handshake from git")
    io.write_text("git-filter-server", "version=2")
    offered = {line.partition("=")[2] for line in io.read_text_list()}
    io.write_text(*(f"capability={c}" for c in ("clean", "smudge") if c in offered))
    while True:
        try:
            request = _pairs(io.read_text_list())
        except EOFError:
            return
        content = io.read_content()
        command, path = request.get("command", ""), request.get("pathname", "")
        try:
            if command == "smudge":
                result = smudge(config, path, content)
            elif command == "clean":
                result = clean(config, path, content)
            else:
                raise GitmemError(f"unknown filter command {command!r}")
        except GitmemError as exc:
            log.error("gitmem: %s", exc.message)
            io.write_text("status=error")
            continue
        io.write_text("status=success")
        io.write_content(result)
        io.flush()  # an empty list: the status stays "success"


# --- setting up a clone ---------------------------------------------------------------------------


def _filter_command(*args: str) -> str:
    # Git runs these through the shell. Pin this interpreter, and put this gitmem on its path so the
    # filter works even where gitmem is not installed into the interpreter (a checkout, tests).
    root = Path(__file__).resolve().parents[2]
    python = shlex.quote(sys.executable)
    return " ".join(["env", shlex.quote(f"PYTHONPATH={root}"), python, "-P", "-m", "gitmem", "git-filter", *args])


def _is_clean_worktree(repo_dir: Path) -> bool:
    status = _git(["status", "--porcelain", "--untracked-files=no"], repo_dir)
    return status.stdout.strip() == ""


def _has_checkout(repo_dir: Path) -> bool:
    # A `clone --no-checkout` has a HEAD but an empty index: nothing to rewrite, the later checkout smudges.
    has_head = _git(["rev-parse", "--verify", "-q", "HEAD"], repo_dir, check=False).returncode == 0
    return has_head and _git(["ls-files"], repo_dir).stdout != ""


def _recheckout(repo_dir: Path) -> None:
    """Write every tracked file again through the smudge filter.

    ``checkout-index --force`` alone skips files whose cleaned content matches the index, which the
    still-encrypted files do (clean passes ciphertext through), so remove them first. Only called on a
    clean tree, so nothing of the user's is lost. ``-u`` refreshes stat data: ``git status`` stays clean.
    """
    top = Path(_git(["rev-parse", "--show-toplevel"], repo_dir).stdout.strip())
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=top, check=True, capture_output=True).stdout  # noqa: S607  git from PATH, an argument list (no shell)
    for name in filter(None, listed.split(b"\0")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(top / os.fsdecode(name))
    _git(["checkout-index", "--all", "--force", "-u"], top)


def configure_clone(repo_dir: Path, key_text: str, store_id: str, *, refresh_checkout: bool = True) -> None:
    """Give a clone the key, the filter and the attributes, so checkout and ``git log -p`` show plaintext.

    With ``refresh_checkout`` a clean, checked-out working tree is rewritten through the new smudge
    filter (a clone made before this call holds ciphertext files). A dirty tree is left alone.
    """
    repo_dir = Path(repo_dir)
    key = import_key(key_text)  # validate before writing anything
    bare = _git(["rev-parse", "--is-bare-repository"], repo_dir).stdout.strip() == "true"
    refresh = refresh_checkout and not bare and _has_checkout(repo_dir)
    if refresh and not _is_clean_worktree(repo_dir):
        log.warning("%s has uncommitted changes: its checkout is left encrypted", repo_dir)
        refresh = False

    settings = [
        ("gitmem.key", export_key(key)),
        ("gitmem.storeid", store_id),
        (f"filter.{DRIVER}.process", _filter_command("process")),
        (f"filter.{DRIVER}.smudge", _filter_command("smudge", "%f")),
        (f"filter.{DRIVER}.clean", _filter_command("clean", "%f")),
        (f"filter.{DRIVER}.required", "true"),
        (f"diff.{DRIVER}.textconv", _filter_command("textconv")),
        # Deliberately no diff.gitmem.cachetextconv: that would store plaintext in refs/notes.
    ]
    for name, value in settings:
        _git(["config", "--local", "--replace-all", name, value], repo_dir)
    config_path = Path(_git(["rev-parse", "--git-path", "config"], repo_dir).stdout.strip())
    config_path = config_path if config_path.is_absolute() else repo_dir / config_path
    os.chmod(config_path, 0o600)  # it now holds the key; Git keeps the mode when it rewrites the file

    attributes = Path(_git(["rev-parse", "--git-path", "info/attributes"], repo_dir).stdout.strip())
    attributes = attributes if attributes.is_absolute() else repo_dir / attributes
    attributes.parent.mkdir(parents=True, exist_ok=True)
    existing = attributes.read_text("utf-8") if attributes.exists() else ""
    if ATTRIBUTES_LINE not in existing.splitlines():
        sep = "" if not existing or existing.endswith("\n") else "\n"
        attributes.write_text(existing + sep + ATTRIBUTES_LINE + "\n", "utf-8")

    if refresh:
        _recheckout(repo_dir)
    log.info("configured %s for gitmem store %s (key %s)", repo_dir, store_id, key.key_id)


# --- entry point ----------------------------------------------------------------------------------


def _load_config_or_none() -> FilterConfig | None:
    try:
        return read_config()
    except FilterNotConfigured as exc:
        log.warning("%s", exc.message)
        return None


FilterCommand = Literal["process", "smudge", "clean", "textconv"]


def run_filter(command: FilterCommand, path: str | None, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """One run of the filter as Git starts it (``gitmem git-filter``); returns its exit status.
    ``path`` is the note's path (smudge, clean) or the file to show (textconv)."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr, force=True)
    config = _load_config_or_none()
    try:
        if command == "process":
            serve_process(config, stdin, stdout)
        elif command == "textconv":
            stdout.write(textconv(config, Path(str(path)).read_bytes()))
        elif command == "smudge":
            stdout.write(smudge(config, str(path), stdin.read()))
        else:
            stdout.write(clean(config, str(path), stdin.read()))
        stdout.flush()
    except GitmemError as exc:
        log.error("gitmem: %s", exc.message)
        return 1
    return 0


if __name__ == "__main__":  # clones configured before `gitmem git-filter` existed still name this module
    os.execv(sys.executable, [sys.executable, "-m", "gitmem", "git-filter", *sys.argv[1:]])  # noqa: S606  re-runs this very program (sys.executable -m gitmem)
