"""The memory tool's words: listings and numbered lines laid out as the SDK's local implementation
lays them out, the checks of a command's fields, and engine refusals worded for the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gitmem.agents.memory_tool.paths import MEMORY_ROOT, Refusal
from gitmem.errors import (
    ArchivedStore,
    GitmemError,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PathConflict,
    PermissionDenied,
    PreconditionFailed,
    SecretRefused,
    StoreBusy,
    TooLarge,
)
from gitmem.model import Note
from gitmem.rules.policy import PATH_FIELD

# The local implementation's limits and layout.
MAX_LINES = 999_999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
LISTING_DEPTH = 2
# Folders are implicit, so there is no directory inode to measure; ext4 reports 4096 for one.
FOLDER_SIZE_BYTES = 4096


# --- formatting (the local implementation's layout) --------------------------------------------------


def format_size(size_bytes: int) -> str:
    """``0B``, ``512B``, ``1.5K``, ``2K``, ``1.2M``: binary units, one decimal unless whole."""
    if size_bytes == 0:
        return "0B"
    units = ("B", "K", "M", "G")
    exponent = min((size_bytes.bit_length() - 1) // 10, len(units) - 1)
    scaled = size_bytes / 1024**exponent
    return f"{int(scaled)}{units[exponent]}" if scaled == int(scaled) else f"{scaled:.1f}{units[exponent]}"


def numbered_line(line_number: int, line: str) -> str:
    return f"{str(line_number).rjust(LINE_NUMBER_WIDTH)}\t{line}"


def lines_without_final_empty(content: str) -> list[str]:
    """Split on LF only (a CR stays part of its line), without the empty tail of a trailing newline."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


@dataclass
class Folder:
    """One folder of a listing tree; ``files`` maps a name to its size in bytes."""

    files: dict[str, int] = field(default_factory=dict)
    folders: dict[str, Folder] = field(default_factory=dict)


def listing_tree(notes: list[Note], prefix: str) -> Folder:
    """The folders and files below ``prefix`` to the listing depth, hidden (dot) names left out."""
    root = Folder()
    for note in notes:
        segments = note.path[len(prefix) :].split("/")
        folder = root
        for depth, segment in enumerate(segments[:LISTING_DEPTH]):
            if segment.startswith("."):
                break
            if depth == len(segments) - 1:
                folder.files[segment] = note.content_size_bytes
            else:
                folder = folder.folders.setdefault(segment, Folder())
    return root


def listing_entries(folder: Folder, relative: str = "", depth: int = 1) -> list[tuple[str, str]]:
    """``(size, relative path)`` pairs, depth first, names in code-point order, folders ending in ``/``."""
    entries: list[tuple[str, str]] = []
    for name in sorted({*folder.files, *folder.folders}):
        child = f"{relative}/{name}" if relative else name
        if name in folder.folders:
            entries.append((format_size(FOLDER_SIZE_BYTES), f"{child}/"))
            if depth < LISTING_DEPTH:
                entries.extend(listing_entries(folder.folders[name], child, depth + 1))
        else:
            entries.append((format_size(folder.files[name]), child))
    return entries


# --- input checking ----------------------------------------------------------------------------------


def required_str(command: Mapping[str, Any], name: str) -> str:
    value = command.get(name)
    if value is None:
        raise Refusal(f"Missing required parameter `{name}` for command `{command['command']}`.")
    if not isinstance(value, str):
        raise Refusal(f"Invalid `{name}` parameter: it must be a string.")
    return value


def required_int(command: Mapping[str, Any], name: str) -> int:
    value = command.get(name)
    if value is None:
        raise Refusal(f"Missing required parameter `{name}` for command `{command['command']}`.")
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refusal(f"Invalid `{name}` parameter: {value!r}. It must be an integer.")
    return value


def optional_view_range(command: Mapping[str, Any]) -> list[int] | None:
    value = command.get("view_range")
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(type(bound) is int for bound in value):
        raise Refusal(f"Invalid `view_range` parameter: {value!r}. It should be a list of two integers.")
    return list(value)


# --- engine errors -----------------------------------------------------------------------------------


def as_tool_path(note_path: str) -> str:
    return MEMORY_ROOT + note_path


def describe_engine_error(error: GitmemError, tool_path: str) -> str:
    """A refusal from the store, worded for the model: what happened, and that nothing was written."""
    if isinstance(error, PathConflict):
        other = error.details.get("conflicting_path")
        where = f"the existing {as_tool_path(other)}" if other else "an existing file"
        return (
            f"Cannot write {tool_path}: it conflicts with {where} "
            "(a file cannot sit at, above or below another file). Nothing was changed."
        )
    if isinstance(error, PreconditionFailed):
        kept = error.details.get("conflict_id")
        also = f" Your edit is kept as conflict {kept}." if kept else ""
        return (
            f"The file {tool_path} was changed by someone else while this command ran, so nothing was "
            f"written to it.{also} View it again and retry."
        )
    if isinstance(error, NotFound):
        return f"The file {tool_path} no longer exists (may have been deleted or renamed concurrently)."
    if isinstance(error, SecretRefused):
        if error.message.startswith(PATH_FIELD):  # the path holds the secret: not repeated
            return f"Refused to write that file: {error.message}"
        return f"Refused to write {tool_path}: {error.message}"
    if isinstance(error, TooLarge | LimitExceeded):
        return f"Refused to write {tool_path}: {error.message}"
    if isinstance(error, ArchivedStore):
        return f"The memory store is archived, so {tool_path} cannot be written: {error.message}"
    if isinstance(error, PermissionDenied):
        return f"Permission denied for {tool_path}: {error.message}"
    if isinstance(error, StoreBusy):
        return f"The memory store is busy, so nothing was done to {tool_path}; retry shortly: {error.message}"
    if isinstance(error, InvalidRequest):  # e.g. a name Git reserves, or a path too long for a note
        return f"Cannot use {tool_path}: {error.message}"
    return f"Error for {tool_path}: {error.message}"


def path_in_question(command: Mapping[str, Any], error: GitmemError) -> str:
    if command.get("command") == "rename":
        # A collision is the destination's problem; anything else (gone, busy, refused) the source's.
        return str(command.get("new_path") if isinstance(error, PathConflict) else command.get("old_path"))
    return str(command.get("path"))
