"""First run: a workspace and an admin key for an empty home."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from gitmem.engine.gitmem import Gitmem

log = logging.getLogger(__name__)
ADMIN_KEY_FILE = "admin.key"


def ensure_admin_key(gm: Gitmem) -> Path | None:
    """If the home has no API key yet, make a workspace and an admin key, and write the secret to
    ``$GITMEM_HOME/admin.key`` (mode 0600). Returns that path, or None if keys already exist."""
    if gm.catalog.list_api_keys():
        return None
    workspace = gm.catalog.workspace_by_name("default") or gm.catalog.create_workspace("default")
    _key, secret = gm.catalog.create_api_key(workspace.id, "admin", "admin")
    path = gm.home / ADMIN_KEY_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secret + "\n")
    log.info("created workspace %s and an admin key in %s", workspace.id, path)
    return path
