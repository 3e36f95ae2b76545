"""The ``## Profile Memory Bank`` section of an agent's system prompt (the profile-bank API).

The section tells the model that ``.memory/`` exists, what it holds (the current entry paths), that
edits there carry over to later sessions, and that transient files do not belong there (the directory
is wiped to the bank's entries at every session start). For an empty bank it asks the model to create
the first entry instead of listing entries.

Only sessions started from a user's profile get it; nothing here knows about HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gitmem.rules.paths import BANK_MAX_CHARS, BANK_MAX_SEGMENTS

if TYPE_CHECKING:
    from gitmem.banks.profiles import Bank

HEADING = "## Profile Memory Bank"
DEFAULT_DIR = ".memory/"
MAX_LISTED = 100  # a bank holds at most 100 entries: every one is listed


def _limits(directory: str) -> list[str]:
    return [
        f"- Paths are relative to `{directory}`: letters, digits, `.`, `_`, `-` and `/` only, at most"
        f" {BANK_MAX_SEGMENTS} levels deep and {BANK_MAX_CHARS} characters; no segment may start with `.`"
        " (editor temp files such as `.swp` or `.#x` are never saved).",
        "- At most 100 entries, 64 KiB each and 5 MiB in all. Keep entries short, factual markdown.",
    ]


def render_section(entry_paths: Iterable[str], *, directory: str = DEFAULT_DIR, profile_name: str | None = None) -> str:
    """The markdown section for a bank holding ``entry_paths`` (relative paths, any order)."""
    directory = directory if directory.endswith("/") else directory + "/"
    listed = sorted(entry_paths)
    whose = f" of the profile \u201c{profile_name}\u201d" if profile_name else ""
    lines = [
        HEADING,
        "",
        f"Your durable memory{whose} is the directory `{directory}` in the workspace. It is this"
        " profile's memory bank: what is there when the session starts was written in earlier sessions,"
        " and every file you create, edit or delete there is saved back to the bank automatically"
        " (within a few seconds) and will be there in the next session that uses this profile. You do"
        " not need any API or tool beyond reading and writing files.",
        "",
    ]
    if listed:
        lines.append(
            f"The bank holds {len(listed)} entr{'y' if len(listed) == 1 else 'ies'}; read the"
            " ones that bear on your task before you start:"
        )
        lines.append("")
        lines += [f"- `{directory}{path}`" for path in listed[:MAX_LISTED]]
        if len(listed) > MAX_LISTED:
            lines.append(f"- \u2026 and {len(listed) - MAX_LISTED} more")
        lines += [
            "",
            "Keep these entries current: when you learn a lasting preference, a fact about the"
            " environment, or where a recurring project stands, update the entry it belongs in (or add"
            " one) rather than repeating it elsewhere. Remove entries that are no longer true.",
        ]
    else:
        lines += [
            "The bank is empty. When you learn something worth keeping for later sessions (a preference,"
            " a fact about the environment, the state of a recurring project), create the first entry,"
            f" for example `{directory}preferences.md` or `{directory}projects/<name>.md`, and keep it"
            " up to date from then on.",
        ]
    lines += [
        "",
        "How persistence works:",
        "",
        "- The directory belongs entirely to the bank. Do not put transient files there (scratch"
        " output, downloads, build artefacts): anything that is not a bank entry is wiped at the next"
        " session start.",
        *_limits(directory),
        "- Entries are encrypted at rest with the user's key.",
        "",
    ]
    return "\n".join(lines)


def bank_section(bank: Bank, *, directory: str = DEFAULT_DIR) -> str:
    """The section for a :class:`gitmem.banks.profiles.Bank` (its current entry paths)."""
    return render_section(bank.paths(), directory=directory, profile_name=bank.profile.name)
