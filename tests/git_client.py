"""The stock ``git`` client as a pusher runs it: outside pytest too (``bench/push.py`` uses it)."""

from __future__ import annotations

import os


def client_environment(name: str, email: str) -> dict[str, str]:
    """This process's environment without its ``GIT_*`` and ``GITMEM_*`` variables, for a ``git`` that
    reads no configuration of the machine and commits as ``name <email>``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITMEM_"))}
    return env | {
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }
