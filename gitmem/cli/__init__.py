"""The ``gitmem`` command: a thin shell over the library.

Exit status: 0 success, 1 a refused or failed operation (reason on standard error), 2 a usage error.
Each concept has its own module here; each registers its commands on :data:`main`.
"""

from __future__ import annotations

import importlib

from gitmem.cli.base import main

# One module per concept; each adds its commands to `main` when imported.
COMMAND_MODULES = [
    "gitmem.cli.stores",
    "gitmem.cli.notes",
    "gitmem.cli.access",
    "gitmem.cli.maintenance",
    "gitmem.cli.serve",
    "gitmem.cli.audit",
    "gitmem.cli.tasks",
    "gitmem.cli.mount",
    "gitmem.cli.profiles",
    "gitmem.cli.prune",
    "gitmem.cli.dreams",
    "gitmem.cli.find",
    "gitmem.cli.review",
    "gitmem.cli.mcp",
    "gitmem.cli.settings",
    "gitmem.cli.database",
]

for _module in COMMAND_MODULES:
    importlib.import_module(_module)

__all__ = ["main"]
