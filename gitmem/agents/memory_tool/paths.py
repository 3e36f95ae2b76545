"""The memory tool's paths: ``/memories/x.md`` is the note ``/x.md``, and every way a path could escape
``/memories`` (``..``, encoded or look-alike traversal forms, empty segments) is refused.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from dataclasses import dataclass

from gitmem.rules.paths import SEPARATOR_LOOKALIKES

MEMORY_ROOT = "/memories"


# Enough rounds to unwrap any encoding a path could plausibly be smuggled through (%252e is two).
_MAX_DECODE_ROUNDS = 4
_IIS_UNICODE_ESCAPE = re.compile(r"%u([0-9a-fA-F]{4})")


class Refusal(Exception):
    """A command refused before (or instead of) reaching the store; ``message`` goes to the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- paths -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPath:
    """A tool path (``/memories/a/b.md``) confined to the memory root, and the note path it names."""

    tool_path: str
    note_path: str  # "/a/b.md"; "/" for the root itself

    @property
    def is_root(self) -> bool:
        return self.note_path == "/"

    @property
    def folder_prefix(self) -> str:
        """The ``path_prefix`` of everything below this path, as a folder."""
        return "/" if self.is_root else self.note_path + "/"


def _must_start_with_root(path: str) -> Refusal:
    return Refusal(f"Path must start with /memories, got: {path}")


def _would_escape(path: str) -> Refusal:
    return Refusal(f"Path {path} would escape /memories directory")


def _decoded_forms(path: str) -> list[str] | None:
    """``path`` and every form a lenient layer could decode it to (percent, %uXXXX, Unicode compatibility).

    ``None`` when a decoding yields invalid UTF-8: that is how overlong forms such as ``%c0%ae`` (a
    disguised ``.``) arrive, and no honest path needs them.
    """
    forms = [path]
    current = path
    for _ in range(_MAX_DECODE_ROUNDS):
        unwrapped = _IIS_UNICODE_ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), current)
        try:
            decoded = urllib.parse.unquote_to_bytes(unwrapped).decode("utf-8")
        except UnicodeDecodeError:
            return None
        if decoded == current:
            break
        forms.append(decoded)
        current = decoded
    return forms + [unicodedata.normalize("NFKC", form) for form in forms]


def _is_traversal_segment(segment: str) -> bool:
    stripped = segment.strip()
    # ".", "..", "...", " .." (Windows trims trailing dots and spaces), "~" and "~user" (home expansion).
    return (bool(stripped) and set(stripped) == {"."}) or stripped.startswith("~")


def _looks_like_traversal(path: str) -> bool:
    if any(unicodedata.category(ch) == "Cs" for ch in path):  # a lone surrogate is not text at all
        return True
    forms = _decoded_forms(path)
    if forms is None:
        return True
    for form in forms:
        if any(ch in SEPARATOR_LOOKALIKES for ch in form):  # the store's own rule, per decoded form
            return True
        if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in form):  # NUL and its kin
            return True
        if any(_is_traversal_segment(segment) for segment in form.split("/")):
            return True
    return False


def resolve_memory_path(path: str) -> MemoryPath:
    """Confine a tool path to ``/memories`` and map it to a note path, or raise the refusal to send back."""
    if not path.startswith(MEMORY_ROOT):
        raise _must_start_with_root(path)
    rest = path[len(MEMORY_ROOT) :]
    # Checked on what follows the root, so "/memories.." and "/memories../x" count as the escapes they are.
    if _looks_like_traversal(rest):
        raise _would_escape(path)
    if rest in ("", "/"):
        return MemoryPath(path, "/")
    if not rest.startswith("/"):  # "/memoriesX/..." names a sibling of the root, not something in it
        raise _must_start_with_root(path)
    # A trailing slash names the same thing, as it does on a filesystem.
    body = rest[1:].removesuffix("/")
    if "" in body.split("/"):
        raise Refusal(f"Path {path} is not a valid memory path: it has an empty segment")
    return MemoryPath(path, "/" + body)
