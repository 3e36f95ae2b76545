"""Path rules: what a note's path may be, for memory stores and profile banks.

A rule lives here once. Every entry point (API, push hook, memory tool, mount) calls these.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from gitmem.errors import InvalidRequest

MAX_PATH_BYTES = 1024
MAX_SEGMENTS = 20
BANK_MAX_SEGMENTS = 5
BANK_MAX_CHARS = 256
_BANK_CHARS = re.compile(r"[A-Za-z0-9._/-]+")

PathValidator = Callable[[str], str]

# Characters some layer (Windows, a mount, a lenient decoder) might read as a path separator: a path
# holding one would name a different file there than here. Refused in every note path.
SEPARATOR_LOOKALIKES = frozenset("\\\u2044\u2215\u2216\u29f5\u29f8\u29f9\ufe68\uff0f\uff3c")


def _refuse(path: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"invalid path {path!r}: {why}")


def _is_git_reserved(segment: str, *, top_level: bool) -> bool:
    # Git refuses or misreads these; ".git" also in disguise (case, trailing dots/spaces, NTFS 8.3,
    # an NTFS stream ".git::$INDEX_ALLOCATION", a backslash that Windows reads as a folder separator).
    for position, part in enumerate(segment.split("\\")):
        folded = part.split(":", 1)[0].lower().rstrip(". ")
        if folded == ".git" or folded.startswith("git~"):
            return True
        if top_level and position == 0 and folded in {".gitattributes", ".gitmodules", ".gitignore"}:
            return True
    return False


def validate_store_path(path: str) -> str:
    """Check a memory-store path (``/people/sam.md``) and return it unchanged."""
    if not isinstance(path, str) or not path:
        raise _refuse(str(path), "a path is required")
    if not path.startswith("/"):
        raise _refuse(path, "it must start with '/'")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise _refuse(path, f"it is longer than {MAX_PATH_BYTES} UTF-8 bytes")
    for ch in path:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Cs", "Zl", "Zp") or ch in "\u2028\u2029":
            raise _refuse(path, f"it contains the control or format character U+{ord(ch):04X}")
    if unicodedata.normalize("NFC", path) != path:
        raise _refuse(path, "it is not in Unicode Normalization Form C")
    lookalike = next((ch for ch in path if ch in SEPARATOR_LOOKALIKES), None)
    if lookalike is not None:
        raise _refuse(path, f"it contains U+{ord(lookalike):04X}, which some systems read as a path separator")
    segments = path[1:].split("/")
    if len(segments) > MAX_SEGMENTS:
        raise _refuse(path, f"it has more than {MAX_SEGMENTS} segments")
    for index, segment in enumerate(segments):
        if segment in ("", ".", "..") or unicodedata.normalize("NFKC", segment) in (".", ".."):
            raise _refuse(path, "a segment is empty, '.' or '..' (or a look-alike of one)")
        if _is_git_reserved(segment, top_level=index == 0):
            raise _refuse(path, f"{segment!r} is a name Git reserves")
    return path


def fold(path: str) -> str:
    """The form two paths share when a case-insensitive file system (macOS, Windows, a mount, a bank
    at ``.memory/``) would make them one file: ``/Readme.md`` and ``/README.md`` fold alike."""
    return unicodedata.normalize("NFC", path.casefold())


def levels(path: str) -> list[str]:
    """Every folder above a note and the note itself: ``/a/b/c`` -> ``/a``, ``/a/b``, ``/a/b/c``."""
    return [*ancestors(path), path]


def validate_bank_path(path: str) -> str:
    """Check a profile-bank path (``projects/acme.md``) and return it unchanged."""
    if not isinstance(path, str) or not path:
        raise _refuse(str(path), "a path is required")
    if len(path) > BANK_MAX_CHARS:
        raise _refuse(path, f"it is longer than {BANK_MAX_CHARS} characters")
    if not _BANK_CHARS.fullmatch(path):
        raise _refuse(path, "only A-Z a-z 0-9 . _ - / are allowed")
    if path.startswith("/"):
        raise _refuse(path, "it must be relative")
    segments = path.split("/")
    if len(segments) > BANK_MAX_SEGMENTS:
        raise _refuse(path, f"it has more than {BANK_MAX_SEGMENTS} segments")
    for segment in segments:
        if segment == "":
            raise _refuse(path, "a segment is empty")
        if segment.startswith("."):
            raise _refuse(path, "a segment starts with '.'")
    return path


def bank_to_store_path(path: str) -> str:
    return "/" + validate_bank_path(path)


def store_to_bank_path(path: str) -> str:
    return path[1:]


def git_path(path: str) -> str:
    """The tree path of a note: ``/people/sam.md`` -> ``people/sam.md``."""
    return path[1:]


def api_path(tree_path: str) -> str:
    return "/" + tree_path


def ancestors(path: str) -> list[str]:
    """The folder paths above a note, without the trailing slash: ``/a/b/c`` -> ``/a``, ``/a/b``."""
    parts = path[1:].split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def validate_prefix(prefix: str) -> str:
    """A ``path_prefix`` for listing: ``/`` or a folder path ending with ``/``."""
    if prefix == "/":
        return prefix
    if not prefix.startswith("/") or not prefix.endswith("/"):
        raise InvalidRequest(f"invalid path_prefix {prefix!r}: it must start and end with '/'")
    validate_store_path(prefix[:-1])
    return prefix
