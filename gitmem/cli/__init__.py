"""The ``gitmem`` command: a thin shell over the library.

Exit status: 0 success, 1 a refused or failed operation (reason on standard error), 2 a usage error.
Each concept has its own module here; each registers its commands on :data:`main`, and is imported only
when one of its commands runs (see :class:`gitmem.cli.base.CommandModules`, in :mod:`.base` with what
every command shares). ``store``: :mod:`.stores`; ``note``, ``versions``, ``redact``: :mod:`.notes`;
``keys``, ``users``: :mod:`.access` (the signing key: :mod:`.signing`); ``audit``: :mod:`.signing`;
``reindex``, ``fsck``, ``pack``: :mod:`.maintenance`; ``serve``: :mod:`.serve`; ``log``: :mod:`.audit`;
``workers``, ``tasks``: :mod:`.tasks`; ``encryption``: :mod:`.encryption`; ``mount``, ``bank-mount``:
:mod:`.mount`; ``profiles``, ``prompt``: :mod:`.profiles`; ``clone``: :mod:`.clone`; ``prune``,
``retention``: :mod:`.prune`; ``dreams``: :mod:`.dreams`; ``search``, ``diff``, ``restore``:
:mod:`.find`; ``review``: :mod:`.review`; ``conflicts``: :mod:`.conflicts`; ``mcp``: :mod:`.mcp`;
``settings``: :mod:`.settings`; ``migrate``, ``db``: :mod:`.database`; ``export``, ``import``:
:mod:`.transfer`; ``backup`` (and a backup's ``restore``): :mod:`.backup`.

Hidden commands are what Git and agent runtimes start, not people: ``gitmem hook`` (the push hooks and
the agent session hooks) and ``gitmem git-filter`` (the encryption filter of a clone), both in
:mod:`gitmem.cli.internal`."""

from __future__ import annotations

from gitmem.cli.base import main

# Each command, by the modules that register it or add subcommands to it (tests/unit/cli/test_cli.py checks
# this list is complete).
COMMAND_MODULES = {
    "gitmem.cli.stores": ["store"],
    "gitmem.cli.notes": ["note", "versions", "redact"],
    "gitmem.cli.access": ["keys", "users"],
    "gitmem.cli.maintenance": ["reindex", "fsck", "pack"],
    "gitmem.cli.serve": ["serve"],
    "gitmem.cli.audit": ["log"],
    "gitmem.cli.tasks": ["workers", "tasks"],
    "gitmem.cli.encryption": ["encryption", "keys"],
    "gitmem.cli.signing": ["keys", "audit"],
    "gitmem.cli.mount": ["mount", "bank-mount"],
    "gitmem.cli.profiles": ["profiles", "prompt"],
    "gitmem.cli.clone": ["clone"],
    "gitmem.cli.prune": ["prune", "retention"],
    "gitmem.cli.dreams": ["dreams"],
    "gitmem.cli.find": ["search", "diff", "restore"],
    "gitmem.cli.review": ["review"],
    "gitmem.cli.conflicts": ["conflicts"],
    "gitmem.cli.mcp": ["mcp"],
    "gitmem.cli.settings": ["settings"],
    "gitmem.cli.internal": ["hook", "git-filter"],
    "gitmem.cli.database": ["migrate", "db"],
    "gitmem.cli.transfer": ["export", "import"],
    "gitmem.cli.backup": ["backup"],
}

for _module, _names in COMMAND_MODULES.items():
    for _name in _names:
        main.modules.setdefault(_name, []).append(_module)

__all__ = ["main"]
