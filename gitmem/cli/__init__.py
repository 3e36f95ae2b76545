"""The ``gitmem`` command: a thin shell over the library.

Exit status: 0 success, 1 a refused or failed operation (reason on standard error), 2 a usage error.
Each concept has its own module, in a folder for its family; each registers its commands on :data:`main`,
and is imported only when one of its commands runs (see :class:`gitmem.cli.base.CommandModules`, in
:mod:`.base` with what every command shares). The families:

- :mod:`.notes`: stores and their notes (``store``, ``note``, ``versions``, ``redact``, ``search``,
  ``diff``, ``restore``, ``conflicts``, ``review``, ``log``, ``export``, ``import``), and a store on one's
  own machine (``clone``, ``mount``, ``bank-mount``);
- :mod:`.node`: running and keeping a home (``serve``, ``migrate``, ``db``, ``reindex``, ``fsck``,
  ``pack``, ``prune``, ``retention``, ``backup``, ``settings``);
- :mod:`.access`: who may do what, and the keys (``users``, ``keys``, ``encryption``, ``audit``);
- :mod:`.agents`: agents' work (``workers``, ``tasks``, ``dreams``, ``profiles``, ``prompt``, ``mcp``).

Hidden commands are what Git and agent runtimes start, not people: ``gitmem hook`` (the push hooks and
the agent session hooks) and ``gitmem git-filter`` (the encryption filter of a clone), both in
:mod:`gitmem.cli.node.internal`."""

from __future__ import annotations

from gitmem.cli.base import main

# Each command, by the modules that register it or add subcommands to it (tests/unit/cli/test_cli.py checks
# this list is complete), a module after those it imports.
COMMAND_MODULES = {
    "gitmem.cli.access.users": ["keys", "users"],
    "gitmem.cli.access.encryption": ["encryption", "keys"],
    "gitmem.cli.access.signing": ["keys", "audit"],
    "gitmem.cli.agents.tasks": ["workers", "tasks"],
    "gitmem.cli.agents.dreams": ["dreams"],
    "gitmem.cli.agents.profiles": ["profiles", "prompt"],
    "gitmem.cli.agents.mcp": ["mcp"],
    "gitmem.cli.node.serve": ["serve"],
    "gitmem.cli.node.database": ["migrate", "db"],
    "gitmem.cli.node.maintenance": ["reindex", "fsck", "pack"],
    "gitmem.cli.node.prune": ["prune", "retention"],
    "gitmem.cli.node.backup": ["backup"],
    "gitmem.cli.node.settings": ["settings"],
    "gitmem.cli.node.internal": ["hook", "git-filter"],
    "gitmem.cli.notes.stores": ["store"],
    "gitmem.cli.notes.notes": ["note", "versions", "redact"],
    "gitmem.cli.notes.find": ["search", "diff", "restore"],
    "gitmem.cli.notes.conflicts": ["conflicts"],
    "gitmem.cli.notes.review": ["review"],
    "gitmem.cli.notes.audit": ["log"],
    "gitmem.cli.notes.transfer": ["export", "import"],
    "gitmem.cli.notes.clone": ["clone"],
    "gitmem.cli.notes.mount": ["mount", "bank-mount"],
}

for _module, _names in COMMAND_MODULES.items():
    for _name in _names:
        main.modules.setdefault(_name, []).append(_module)

__all__ = ["main"]
