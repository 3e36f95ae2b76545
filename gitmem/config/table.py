"""The table of settings in docs/settings.md (``gitmem settings --markdown``), generated from the
settings object's fields: what each means, and its default as a person reads it."""

from __future__ import annotations

from gitmem.config.names import PREFIX
from gitmem.config.settings import GitmemSettings, field_extra


def _default_text(name: str) -> str:
    shown = field_extra(name).get("shown_default")
    if shown:
        return str(shown)
    default = GitmemSettings.model_fields[name].default
    if default is None or default == "":
        return "none"
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def markdown_table() -> str:
    """The table of settings in docs/settings.md, generated from :class:`GitmemSettings`."""
    sections = {
        "server": "the server and every command",
        "client": "client commands (`mount`, `clone`, `prompt`, the agent hooks)",
        "hook": "set by the server for its Git hooks; not for you to set",
    }
    lines = ["| variable | meaning | default |", "| --- | --- | --- |"]
    for group, title in sections.items():
        lines.append(f"| **{title}** | | |")
        for name, field in GitmemSettings.model_fields.items():
            if field_extra(name).get("group") == group:
                lines.append(f"| `{PREFIX}{name}` | {field.description} | {_default_text(name)} |")
    return "\n".join(lines) + "\n"
